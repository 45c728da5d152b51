#include <spillway/core/error.hpp>
#include <spillway/shuffle/shuffle_options.hpp>

#include <string>

namespace spillway {
namespace {

/// splitmix64's finalizer: a well-mixed 64-bit value from any input.
std::uint64_t mix(std::uint64_t value) noexcept {
  value += 0x9E3779B97F4A7C15ULL;
  value = (value ^ (value >> 30U)) * 0xBF58476D1CE4E5B9ULL;
  value = (value ^ (value >> 27U)) * 0x94D049BB133111EBULL;
  return value ^ (value >> 31U);
}

}  // namespace

shard_loss_hook random_shard_loss(double probability, std::uint64_t seed) {
  SPILLWAY_EXPECTS(
    probability >= 0.0 && probability <= 1.0,
    "random_shard_loss: probability must be in [0, 1], not " + std::to_string(probability),
    invalid_argument);
  return [probability, seed](shard_loss_point point, shard_key const& key) {
    std::uint64_t value = mix(seed);
    value               = mix(value ^ static_cast<std::uint64_t>(point));
    value               = mix(value ^ static_cast<std::uint64_t>(key.rank));
    value               = mix(value ^ key.map);
    value               = mix(value ^ key.partition);
    // The top 53 bits as a uniform double in [0, 1).
    double const uniform = static_cast<double>(value >> 11U) * 0x1.0p-53;
    return uniform < probability;
  };
}

}  // namespace spillway
