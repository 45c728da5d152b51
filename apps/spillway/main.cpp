/**
 * The `spillway` command-line tool: parses the command line and runs one subcommand.
 *
 * Every failure ends in one line on stderr, `spillway: error: <what and where>`, and the exit
 * status says whose it is: 2 for the command line (flags, values, columns, budgets), 1 for the
 * run (I/O, corrupt input, memory, a failed verification).
 */
#include "command_line.hpp"
#include "commands.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>
#include <vector>

namespace {

int fail(spillway::cli::exit_code code, std::string const& message) {
  std::fprintf(stderr, "spillway: error: %s\n", spillway::cli::user_message(message).c_str());
  return static_cast<int>(code);
}

}  // namespace

int main(int argc, char** argv) {
  using spillway::cli::exit_code;
  // The tool reports failures in one line; library warnings (each failed spill write, say) are
  // only shown when asked for with SPILLWAY_LOG_LEVEL.
  if (std::getenv("SPILLWAY_LOG_LEVEL") == nullptr) {
    spillway::set_log_level(spillway::log_level::ERROR);
  }
  CLI::App app{"spillway: out-of-core sort of columnar data under hard memory budgets", "spillway"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Print the help of every subcommand");
  std::vector<spillway::cli::command> const commands{spillway::cli::add_gen_command(app),
                                                     spillway::cli::add_sort_command(app),
                                                     spillway::cli::add_shuffle_command(app),
                                                     spillway::cli::add_verify_command(app)};
  try {
    app.parse(argc, argv);
  } catch (CLI::ParseError const& error) {
    if (error.get_exit_code() == 0) {
      return app.exit(error);  // --help
    }
    return fail(exit_code::USAGE, error.what());
  }
  try {
    for (auto const& command : commands) {
      if (command.app->parsed()) {
        return command.run();
      }
    }
    return fail(exit_code::USAGE, "no subcommand given");
  } catch (spillway::cli::usage_error const& error) {
    return fail(exit_code::USAGE, error.what());
  } catch (spillway::cli::verification_error const& error) {
    return fail(exit_code::FAILURE, error.what());
  } catch (spillway::out_of_memory const& error) {
    return fail(exit_code::FAILURE,
                std::string{"out of memory: "} + error.what() +
                  " (the budgets are too small for this input: give more --device-memory or "
                  "--host-memory)");
  } catch (std::bad_alloc const&) {
    return fail(exit_code::FAILURE, "out of host memory");
  } catch (std::exception const& error) {
    return fail(exit_code::FAILURE, error.what());
  }
}
