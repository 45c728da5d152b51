/**
 * @file arrow_c_stream_unavailable.cpp
 * @brief The Arrow C stream interface in a build without Arrow C++: every entry point says why
 * not.
 */
#include <spillway/core/error.hpp>
#include <spillway/io/arrow_c_stream.hpp>

#include <string>

namespace spillway {
namespace {

[[noreturn]] void fail_without_arrow(std::string const& what) {
  SPILLWAY_FAIL(what +
                  " needs Arrow C++, and this build of spillway has none (SPILLWAY_ENABLE_ARROW "
                  "was OFF, or neither find_package(Arrow) nor pyarrow found it)",
                not_supported);
}

}  // namespace

class arrow_stream_reader::impl {};

arrow_stream_reader::arrow_stream_reader(ArrowArrayStream* /*stream*/,
                                         std::string source,
                                         resource_ref /*scratch*/) {
  fail_without_arrow("reading the Arrow stream of " + source);
}

arrow_stream_reader::~arrow_stream_reader() = default;

table_schema const& arrow_stream_reader::schema() const noexcept {
  static table_schema const none;
  return none;
}

std::optional<table_view> arrow_stream_reader::next() {
  fail_without_arrow("reading an Arrow stream");
}

void export_arrow_stream(table_schema const& /*schema*/,
                         table_source /*source*/,
                         ArrowArrayStream* /*out*/) {
  fail_without_arrow("exporting an Arrow stream");
}

}  // namespace spillway
