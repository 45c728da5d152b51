/**
 * Tests of `run_recorder`: sampling gauges and counting events over time (deterministic through
 * `sample_now()`), the JSON and HTML reports, and the HTML as rendered by headless Chromium.
 */
#include <spillway/runtime/run_report.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace spillway {
namespace {

namespace fs = std::filesystem;

/// The data-series every report draws, one path each.
std::vector<std::string> const EXPECTED_SERIES = {"device",
                                                  "host",
                                                  "disk",
                                                  "granted",
                                                  "waiting",
                                                  "spilled",
                                                  "unspilled",
                                                  "retries",
                                                  "splits",
                                                  "rows"};

event make_event(event_kind kind, std::size_t bytes, std::int64_t value = 0) {
  event e{};
  e.time  = std::chrono::steady_clock::now();
  e.kind  = kind;
  e.bytes = bytes;
  e.value = value;
  return e;
}

/** @brief Gauges the test sets by hand. */
struct fake_gauges {
  std::atomic<std::size_t> device{0};
  std::atomic<std::size_t> host{0};
  std::atomic<std::size_t> disk{0};
  std::atomic<std::size_t> rows{0};

  run_gauges gauges() {
    run_gauges g;
    g.device_bytes = [this] { return device.load(); };
    g.host_bytes   = [this] { return host.load(); };
    g.disk_bytes   = [this] { return disk.load(); };
    g.rows_done    = [this] { return rows.load(); };
    return g;
  }
};

run_recorder_options manual() {
  run_recorder_options options;
  options.interval = std::chrono::milliseconds{0};
  options.title    = "test run";
  return options;
}

/** @brief Records a small run: three samples with spills, an unspill, a retry and a lease. */
void record_small_run(fake_gauges& g, run_recorder& recorder) {
  recorder.start();
  g.device = 1000;
  g.rows   = 10;
  recorder.events().record(make_event(event_kind::LEASE_GRANTED, 100));
  recorder.events().record(make_event(event_kind::SPILLED, 400, 0 * 4 + 1));
  g.device = 600;
  g.host   = 400;
  recorder.sample_now();
  recorder.events().record(make_event(event_kind::SPILLED, 300, 1 * 4 + 2));
  recorder.events().record(make_event(event_kind::OOM_RETRY, 50));
  recorder.events().record(make_event(event_kind::UNSPILLED, 300, 2 * 4 + 0));
  g.host = 100;
  g.disk = 300;
  g.rows = 20;
  recorder.stop();
}

TEST(RunRecorder, SamplesGaugesAndCountsEventsOverTime) {
  fake_gauges g;
  run_recorder recorder{g.gauges(), manual()};
  record_small_run(g, recorder);
  auto const samples = recorder.samples();
  ASSERT_EQ(samples.size(), 3U);
  EXPECT_EQ(samples[0].device_bytes, 0U);
  EXPECT_EQ(samples[1].device_bytes, 600U);
  EXPECT_EQ(samples[1].host_bytes, 400U);
  EXPECT_EQ(samples[1].spilled, 1U);
  EXPECT_EQ(samples[1].spilled_bytes, 400U);
  EXPECT_EQ(samples[1].leases_granted, 1U);  // from events: granted minus returned
  EXPECT_EQ(samples[2].disk_bytes, 300U);
  EXPECT_EQ(samples[2].spilled, 2U);
  EXPECT_EQ(samples[2].unspilled, 1U);
  EXPECT_EQ(samples[2].retries, 1U);
  EXPECT_EQ(samples[2].rows_done, 20U);
  for (std::size_t i = 1; i < samples.size(); ++i) {
    EXPECT_GE(samples[i].seconds, samples[i - 1].seconds);
  }
  EXPECT_EQ(recorder.count(event_kind::SPILLED), 2U);
  recorder.stop();  // idempotent
  EXPECT_EQ(recorder.samples().size(), 3U);
}

TEST(RunRecorder, LeaseGaugesFromEventsAndCallbacks) {
  run_recorder from_events{run_gauges{}, manual()};
  from_events.events().record(make_event(event_kind::LEASE_WAIT_BEGIN, 10));
  from_events.events().record(make_event(event_kind::LEASE_WAIT_BEGIN, 10));
  auto granted     = make_event(event_kind::LEASE_GRANTED, 10);
  granted.duration = std::chrono::milliseconds{5};
  from_events.events().record(granted);
  auto s = from_events.sample_now();
  EXPECT_EQ(s.leases_granted, 1U);
  EXPECT_EQ(s.leases_waiting, 1U);

  run_gauges gauges;
  gauges.leases_granted = [] { return std::size_t{7}; };
  gauges.leases_waiting = [] { return std::size_t{3}; };
  run_recorder from_callbacks{gauges, manual()};
  s = from_callbacks.sample_now();
  EXPECT_EQ(s.leases_granted, 7U);
  EXPECT_EQ(s.leases_waiting, 3U);
}

TEST(RunRecorder, KeepsSamplesBounded) {
  auto options        = manual();
  options.max_samples = 16;
  run_recorder recorder{run_gauges{}, options};
  for (int i = 0; i < 100; ++i) {
    recorder.sample_now();
  }
  auto const samples = recorder.samples();
  EXPECT_LE(samples.size(), 16U);
  EXPECT_GE(samples.size(), 8U);
  for (std::size_t i = 1; i < samples.size(); ++i) {
    EXPECT_GE(samples[i].seconds, samples[i - 1].seconds);
  }
}

TEST(RunRecorder, JsonHasEverySeriesAndEventCounts) {
  fake_gauges g;
  run_recorder recorder{g.gauges(), manual()};
  record_small_run(g, recorder);
  auto const json = nlohmann::json::parse(recorder.to_json());
  EXPECT_EQ(json["title"], "test run");
  EXPECT_EQ(json["samples"], 3);
  for (auto const* name : {"seconds",
                           "device",
                           "host",
                           "disk",
                           "leases_granted",
                           "leases_waiting",
                           "rows",
                           "bytes",
                           "spilled",
                           "unspilled",
                           "retries",
                           "splits",
                           "spilled_bytes",
                           "unspilled_bytes"}) {
    ASSERT_TRUE(json["series"].contains(name)) << name;
    EXPECT_EQ(json["series"][name].size(), 3U) << name;
  }
  EXPECT_EQ(json["series"]["device"][1], 600);
  EXPECT_EQ(json["series"]["disk"][2], 300);
  EXPECT_EQ(json["event_counts"]["spilled"]["count"], 2);
  EXPECT_EQ(json["event_counts"]["spilled"]["bytes"], 700);
  EXPECT_EQ(json["event_counts"]["oom_retry"]["count"], 1);
  ASSERT_EQ(json["events"].size(), 4U);  // spills, the retry and the unspill; not the lease
  EXPECT_EQ(json["events"][0]["kind"], "spilled");
  EXPECT_EQ(json["events"][0]["from"], "device");
  EXPECT_EQ(json["events"][0]["to"], "host");
  EXPECT_EQ(json["events"][3]["from"], "disk");
  EXPECT_EQ(json["events"][3]["to"], "device");
}

std::size_t occurrences(std::string const& text, std::string const& needle) {
  std::size_t count = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

TEST(RunRecorder, HtmlIsSelfContainedWithOneSvgPerChart) {
  fake_gauges g;
  run_recorder recorder{g.gauges(), manual()};
  record_small_run(g, recorder);
  auto const html = recorder.to_html();
  EXPECT_EQ(occurrences(html, "<svg"), 4U);
  EXPECT_EQ(occurrences(html, "</svg>"), 4U);
  for (auto const* chart : {"memory", "leases", "events", "progress"}) {
    EXPECT_EQ(occurrences(html, std::string{"data-chart=\""} + chart + "\""), 1U) << chart;
  }
  for (auto const& series : EXPECTED_SERIES) {
    EXPECT_EQ(occurrences(html, "<path class=\"series\" data-series=\"" + series + "\""), 1U)
      << series;
    EXPECT_EQ(occurrences(html, "data-legend=\"" + series + "\""), 1U) << series;
  }
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find(" src="), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_NE(html.find("id=\"run-data\""), std::string::npos);
}

TEST(RunRecorder, HtmlOfAnEmptyRecorderStillDrawsEveryChart) {
  run_recorder recorder{run_gauges{}, manual()};
  auto const html = recorder.to_html();
  EXPECT_EQ(occurrences(html, "<svg"), 4U);
  EXPECT_EQ(occurrences(html, "<path class=\"series\""), EXPECTED_SERIES.size());
}

TEST(RunRecorder, ALaneForEachTaskWithItsSemaphoreHoldsAndCounts) {
  run_recorder recorder{run_gauges{}, manual()};
  recorder.start();
  auto const task_event = [](event_kind kind, std::uint64_t task, std::uint64_t other = 0) {
    auto e       = make_event(kind, 64);
    e.task       = task_id{task};
    e.other_task = task_id{other};
    return e;
  };
  auto acquired     = task_event(event_kind::SEMAPHORE_ACQUIRED, 2);
  acquired.duration = std::chrono::milliseconds{5};
  recorder.events().record(acquired);
  auto waited     = task_event(event_kind::LEASE_GRANTED, 2);
  waited.duration = std::chrono::milliseconds{1};
  recorder.events().record(waited);
  recorder.events().record(task_event(event_kind::LEASE_LENT, 1, 2));
  recorder.events().record(task_event(event_kind::OOM_RETRY, 2));
  recorder.events().record(task_event(event_kind::OOM_SPLIT, 1));
  recorder.events().record(task_event(event_kind::SEMAPHORE_RELEASED, 2));
  recorder.events().record(task_event(event_kind::SEMAPHORE_ACQUIRED, 1));
  recorder.events().record(task_event(event_kind::SEMAPHORE_RELEASED, 1));
  recorder.events().record(make_event(event_kind::SPILLED, 8, 1));  // of no task: no lane
  recorder.stop();
  auto const json  = nlohmann::json::parse(recorder.to_json());
  auto const tasks = json.at("tasks");
  ASSERT_EQ(tasks.size(), 2U);
  EXPECT_EQ(tasks[0].at("task"), 1);
  EXPECT_EQ(tasks[0].at("lent_bytes"), 64);
  EXPECT_EQ(tasks[0].at("splits"), 1);
  EXPECT_EQ(tasks[0].at("semaphore_held").size(), 1U);
  EXPECT_EQ(tasks[1].at("task"), 2);
  EXPECT_EQ(tasks[1].at("borrowed_bytes"), 64);
  EXPECT_EQ(tasks[1].at("lease_waits"), 1);
  EXPECT_EQ(tasks[1].at("retries"), 1);
  EXPECT_EQ(tasks[1].at("semaphore_acquires"), 1);
  EXPECT_NEAR(tasks[1].at("semaphore_wait_seconds").get<double>(), 0.005, 1e-9);
  auto const held = tasks[1].at("semaphore_held").at(0);
  EXPECT_LE(held.at(0).get<double>(), held.at(1).get<double>());
  auto const html = recorder.to_html();
  EXPECT_EQ(occurrences(html, "data-chart=\"task-lanes\""), 1U);
  EXPECT_EQ(occurrences(html, "<g data-task="), 2U);
}

TEST(RunRecorder, WritesBothFiles) {
  auto const dir =
    fs::temp_directory_path() / ("spillway_run_report_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fake_gauges g;
  run_recorder recorder{g.gauges(), manual()};
  record_small_run(g, recorder);
  recorder.write_run_report(dir / "report.html", dir / "report.json");
  EXPECT_GT(fs::file_size(dir / "report.html"), 1000U);
  std::ifstream json_file{dir / "report.json"};
  EXPECT_EQ(nlohmann::json::parse(json_file)["samples"], 3);
  EXPECT_THROW(recorder.write_run_report(dir / "missing" / "r.html", dir / "missing" / "r.json"),
               std::exception);
  fs::remove_all(dir);
}

/** @brief Many threads record events and a sampler thread runs; meant for ThreadSanitizer. */
TEST(RunRecorder, ConcurrentRecordingAndSampling) {
  fake_gauges g;
  run_recorder_options options;
  options.interval    = std::chrono::milliseconds{1};
  options.max_samples = 64;
  run_recorder recorder{g.gauges(), options};
  recorder.start();
  constexpr int THREADS = 4;
  constexpr int EVENTS  = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < THREADS; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < EVENTS; ++i) {
        recorder.events().record(make_event(event_kind::SPILLED, 8, 1));
        g.device.fetch_add(1);
        if (i % 100 == 0) {
          recorder.sample_now();
          (void)recorder.samples();
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds{5});
  recorder.stop();
  auto const samples = recorder.samples();
  ASSERT_FALSE(samples.empty());
  EXPECT_LE(samples.size(), 64U);
  EXPECT_EQ(samples.back().spilled, std::size_t{THREADS * EVENTS});
  EXPECT_EQ(samples.back().device_bytes, std::size_t{THREADS * EVENTS});
  EXPECT_FALSE(recorder.to_html().empty());
}

/** @return the headless Chromium on PATH ("chromium" or "chromium-browser"), or "" */
std::string find_chromium() {
  for (auto const* name : {"chromium", "chromium-browser"}) {
    std::string const command = std::string{"command -v "} + name + " > /dev/null 2>&1";
    if (std::system(command.c_str()) == 0) {
      return name;
    }
  }
  return {};
}

TEST(RunRecorder, ChromiumRendersTheCharts) {
  auto const chromium = find_chromium();
  if (chromium.empty()) {
    GTEST_SKIP() << "chromium (or chromium-browser) is not on PATH: the rendering check needs "
                    "Debian's chromium package (scripts/install-deps.sh installs it)";
  }
  auto const dir = fs::temp_directory_path() / ("spillway_chromium_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fake_gauges g;
  run_recorder recorder{g.gauges(), manual()};
  record_small_run(g, recorder);
  recorder.write_run_report(dir / "report.html", dir / "report.json");

  std::string const command =
    "timeout 60 " + chromium + " --headless --disable-gpu --no-sandbox --user-data-dir='" +
    (dir / "profile").string() + "' --dump-dom 'file://" + (dir / "report.html").string() +
    "' 2> '" + (dir / "chromium.err").string() + "'";
  std::string dom;
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char buffer[4096];
  while (auto n = std::fread(buffer, 1, sizeof(buffer), pipe)) {
    dom.append(buffer, n);
  }
  int const status = ::pclose(pipe);
  std::ifstream err_file{dir / "chromium.err"};
  std::stringstream err;
  err << err_file.rdbuf();
  fs::remove_all(dir);
  ASSERT_EQ(status, 0) << "chromium failed: " << err.str();

  // The DOM Chromium built holds each chart's svg and a path with a non-empty `d` per series.
  EXPECT_EQ(occurrences(dom, "<svg"), 4U) << dom.substr(0, 2000);
  for (auto const& series : EXPECTED_SERIES) {
    std::regex const path{"<path[^>]*data-series=\"" + series +
                          "\"[^>]*\\sd=\"M[0-9.]+,[0-9.]+[^\"]*\""};
    EXPECT_TRUE(std::regex_search(dom, path)) << "no drawn path for " << series;
  }
}

}  // namespace
}  // namespace spillway
