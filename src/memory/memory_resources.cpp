#include <spillway/core/error.hpp>
#include <spillway/memory/memory_resources.hpp>

namespace spillway {

memory_resources memory_resources::builder::build() const {
  SPILLWAY_EXPECTS(
    output_.has_value(), "memory_resources::builder needs an output resource", invalid_argument);
  return memory_resources{*output_, temporary_.value_or(*output_)};
}

}  // namespace spillway
