/**
 * @file run_report.cpp
 * @brief `run_recorder`: sampling thread, event counting, JSON and self-contained HTML/SVG.
 */
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/runtime/run_report.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string_view>
#include <utility>

namespace spillway {
namespace {

/// Every event kind, for the counts in the report.
constexpr event_kind ALL_KINDS[] = {
  event_kind::LEASE_GRANTED,      event_kind::LEASE_RETURNED,
  event_kind::LEASE_WAIT_BEGIN,   event_kind::LEASE_LENT,
  event_kind::LEASE_RECLAIMED,    event_kind::LEASE_WHOLE_DEVICE,
  event_kind::LEASE_CANCELLED,    event_kind::LEASE_TIMED_OUT,
  event_kind::SEMAPHORE_ACQUIRED, event_kind::SEMAPHORE_RELEASED,
  event_kind::OOM_SPILLED,        event_kind::OOM_BLOCKED,
  event_kind::OOM_RETRY,          event_kind::OOM_SPLIT,
  event_kind::OOM_INJECTED,       event_kind::SPILLED,
  event_kind::UNSPILLED,          event_kind::SPILL_WRITE_FAILED,
  event_kind::SPILL_READ_FAILED,
};

/// Tier names by `spill_tier` value, as events encode them (from * 4 + to).
constexpr std::string_view TIER_NAMES[] = {"device", "host", "disk", "unknown"};

/** @return whether the event list of the report keeps events of `kind` */
bool kept_kind(event_kind kind) {
  switch (kind) {
    case event_kind::SPILLED:
    case event_kind::UNSPILLED:
    case event_kind::OOM_RETRY:
    case event_kind::OOM_SPLIT:
    case event_kind::SPILL_WRITE_FAILED:
    case event_kind::SPILL_READ_FAILED:
      return true;
    default:
      return false;
  }
}

std::size_t read_gauge(std::function<std::size_t()> const& gauge) { return gauge ? gauge() : 0; }

std::size_t saturating_sub(std::size_t a, std::size_t b) { return a > b ? a - b : 0; }

/** @brief One line of a chart. */
struct chart_series {
  std::string_view name;   ///< the data-series attribute and legend text
  std::string_view color;  ///< stroke color
  std::size_t run_sample::*field;
};

/** @brief One chart: a title, a unit and its lines. */
struct chart_spec {
  std::string_view id;
  std::string_view title;
  bool bytes;  ///< whether values are bytes (formatted as such on the axis)
  std::vector<chart_series> series;
};

std::vector<chart_spec> chart_specs() {
  return {
    {"memory",
     "Bytes on each tier",
     true,
     {{"device", "#1f77b4", &run_sample::device_bytes},
      {"host", "#ff7f0e", &run_sample::host_bytes},
      {"disk", "#2ca02c", &run_sample::disk_bytes}}},
    {"leases",
     "Leases granted and waiting",
     false,
     {{"granted", "#9467bd", &run_sample::leases_granted},
      {"waiting", "#d62728", &run_sample::leases_waiting}}},
    {"events",
     "Spill, unspill and retry events (cumulative)",
     false,
     {{"spilled", "#1f77b4", &run_sample::spilled},
      {"unspilled", "#ff7f0e", &run_sample::unspilled},
      {"retries", "#d62728", &run_sample::retries},
      {"splits", "#8c564b", &run_sample::splits}}},
    {"progress", "Rows done", false, {{"rows", "#17becf", &run_sample::rows_done}}},
  };
}

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

/// Chart geometry, in SVG user units.
constexpr double CHART_WIDTH   = 760;
constexpr double CHART_HEIGHT  = 240;
constexpr double MARGIN_LEFT   = 80;
constexpr double MARGIN_RIGHT  = 130;
constexpr double MARGIN_TOP    = 16;
constexpr double MARGIN_BOTTOM = 36;

/** @brief Writes one `<svg>` chart of `spec` over `samples` (at least one). */
void write_chart(std::ostringstream& out,
                 chart_spec const& spec,
                 std::vector<run_sample> const& samples) {
  double const plot_width  = CHART_WIDTH - MARGIN_LEFT - MARGIN_RIGHT;
  double const plot_height = CHART_HEIGHT - MARGIN_TOP - MARGIN_BOTTOM;
  double const t0          = samples.front().seconds;
  double const t1          = std::max(samples.back().seconds, t0 + 1e-3);
  std::size_t top          = 1;
  for (auto const& s : samples) {
    for (auto const& line : spec.series) {
      top = std::max(top, s.*(line.field));
    }
  }
  auto x = [&](double t) { return MARGIN_LEFT + (t - t0) / (t1 - t0) * plot_width; };
  auto y = [&](std::size_t v) {
    return MARGIN_TOP + plot_height -
           static_cast<double>(v) / static_cast<double>(top) * plot_height;
  };
  auto label = [&](std::size_t v) { return spec.bytes ? format_bytes(v) : std::to_string(v); };

  out << "<section class=\"chart\">\n<h2>" << html_escape(spec.title) << "</h2>\n";
  out << "<svg class=\"chart\" data-chart=\"" << spec.id << "\" viewBox=\"0 0 " << CHART_WIDTH
      << ' ' << CHART_HEIGHT << "\" width=\"" << CHART_WIDTH << "\" height=\"" << CHART_HEIGHT
      << "\" role=\"img\">\n<title>" << html_escape(spec.title) << "</title>\n";
  // Axes, the top value and the time span.
  out << "<g class=\"axes\" stroke=\"#444\" stroke-width=\"1\">"
      << "<line x1=\"" << MARGIN_LEFT << "\" y1=\"" << MARGIN_TOP << "\" x2=\"" << MARGIN_LEFT
      << "\" y2=\"" << MARGIN_TOP + plot_height << "\"/>"
      << "<line x1=\"" << MARGIN_LEFT << "\" y1=\"" << MARGIN_TOP + plot_height << "\" x2=\""
      << MARGIN_LEFT + plot_width << "\" y2=\"" << MARGIN_TOP + plot_height << "\"/></g>\n";
  out << "<g class=\"labels\" font-size=\"11\" fill=\"#222\">"
      << "<text x=\"" << MARGIN_LEFT - 6 << "\" y=\"" << MARGIN_TOP + 4 << "\" text-anchor=\"end\">"
      << html_escape(label(top)) << "</text>"
      << "<text x=\"" << MARGIN_LEFT - 6 << "\" y=\"" << MARGIN_TOP + plot_height
      << "\" text-anchor=\"end\">0</text>"
      << "<text x=\"" << MARGIN_LEFT << "\" y=\"" << CHART_HEIGHT - 12 << "\">" << fixed(t0, 2)
      << " s</text>"
      << "<text x=\"" << MARGIN_LEFT + plot_width << "\" y=\"" << CHART_HEIGHT - 12
      << "\" text-anchor=\"end\">" << fixed(t1, 2) << " s</text></g>\n";
  // One path per series; a single sample draws a flat line across the chart.
  for (auto const& line : spec.series) {
    out << "<path class=\"series\" data-series=\"" << line.name << "\" fill=\"none\" stroke=\""
        << line.color << "\" stroke-width=\"1.5\" d=\"";
    for (std::size_t i = 0; i < samples.size(); ++i) {
      out << (i == 0 ? 'M' : 'L') << fixed(x(samples[i].seconds), 1) << ','
          << fixed(y(samples[i].*(line.field)), 1) << ' ';
    }
    if (samples.size() == 1) {
      out << 'L' << fixed(MARGIN_LEFT + plot_width, 1) << ','
          << fixed(y(samples.front().*(line.field)), 1);
    }
    out << "\"/>\n";
  }
  // The legend, right of the plot.
  out << "<g class=\"legend\" font-size=\"12\">";
  double legend_y = MARGIN_TOP + 10;
  for (auto const& line : spec.series) {
    double const legend_x = MARGIN_LEFT + plot_width + 12;
    out << "<g data-legend=\"" << line.name << "\"><rect x=\"" << legend_x << "\" y=\""
        << legend_y - 9 << "\" width=\"12\" height=\"10\" fill=\"" << line.color << "\"/><text x=\""
        << legend_x + 18 << "\" y=\"" << legend_y << "\">" << line.name << " ("
        << html_escape(label(samples.back().*(line.field))) << ")</text></g>";
    legend_y += 18;
  }
  out << "</g>\n</svg>\n</section>\n";
}

/// Height of one task's lane in the lanes chart.
constexpr double LANE_HEIGHT = 18;

/**
 * @brief Writes one lane per task: when it held the device semaphore (bars, over the run's
 * `end_seconds`), and its leases, waits, lends, spills, retries and splits (a table).
 */
template <typename Lanes>
void write_task_lanes(std::ostringstream& out,
                      Lanes const& lanes,
                      std::chrono::steady_clock::time_point origin,
                      double end_seconds) {
  if (lanes.empty()) {
    return;
  }
  auto const at = [&](std::chrono::steady_clock::time_point time) {
    return std::chrono::duration<double>(time - origin).count();
  };
  double end = std::max(end_seconds, 1e-9);
  for (auto const& [id, lane] : lanes) {
    for (auto const& [from, to] : lane.held) {
      end = std::max(end, at(to));
    }
  }
  double const left   = 70;
  double const width  = CHART_WIDTH - left - 10;
  double const height = LANE_HEIGHT * static_cast<double>(lanes.size()) + 30;
  out << "<section class=\"chart\">\n<h2>Tasks: device semaphore held</h2>\n";
  out << "<svg class=\"chart\" data-chart=\"task-lanes\" viewBox=\"0 0 " << CHART_WIDTH << " "
      << height << "\" width=\"" << CHART_WIDTH << "\" height=\"" << height << "\">\n";
  double y = 10;
  for (auto const& [id, lane] : lanes) {
    out << "<g data-task=\"" << id << "\"><text x=\"4\" y=\"" << y + 12 << "\">task " << id
        << "</text>";
    for (auto const& [from, to] : lane.held) {
      double const x0 = left + width * std::clamp(at(from) / end, 0.0, 1.0);
      double const x1 = left + width * std::clamp(at(to) / end, 0.0, 1.0);
      out << "<rect x=\"" << fixed(x0, 1) << "\" y=\"" << y + 2 << "\" width=\""
          << fixed(std::max(x1 - x0, 0.5), 1) << "\" height=\"" << LANE_HEIGHT - 4
          << "\" fill=\"#4a7\"/>";
    }
    out << "</g>\n";
    y += LANE_HEIGHT;
  }
  out << "<text x=\"" << left << "\" y=\"" << y + 14 << "\">0 s</text><text x=\""
      << left + width - 40 << "\" y=\"" << y + 14 << "\">" << fixed(end, 2) << " s</text>\n";
  out << "</svg>\n<table class=\"tasks\">\n<tr><th>task</th><th>semaphore held</th>"
         "<th>waited</th><th>leases</th><th>lease waits</th><th>lent</th><th>borrowed</th>"
         "<th>whole device</th><th>spills</th><th>retries</th><th>splits</th></tr>\n";
  for (auto const& [id, lane] : lanes) {
    double held = 0;
    for (auto const& [from, to] : lane.held) {
      held += at(to) - at(from);
    }
    out << "<tr><th>" << id << "</th><td>" << lane.acquires << " times, " << fixed(held, 3)
        << " s</td><td>" << fixed(std::chrono::duration<double>(lane.semaphore_wait).count(), 3)
        << " s</td><td>" << lane.leases << "</td><td>" << lane.lease_waits << "</td><td>"
        << html_escape(format_bytes(lane.lent_bytes)) << "</td><td>"
        << html_escape(format_bytes(lane.borrowed_bytes)) << "</td><td>" << lane.whole_device
        << "</td><td>" << lane.oom_spills << "</td><td>" << lane.retries << "</td><td>"
        << lane.splits << "</td></tr>\n";
  }
  out << "</table>\n</section>\n";
}

}  // namespace

// ----- counting_sink -----

void run_recorder::counting_sink::record(event const& e) {
  auto const index = static_cast<std::size_t>(e.kind) % KINDS;
  counts_[index].fetch_add(1, std::memory_order_relaxed);
  bytes_[index].fetch_add(e.bytes, std::memory_order_relaxed);
  if ((e.kind == event_kind::LEASE_GRANTED && e.duration.count() > 0) ||
      e.kind == event_kind::LEASE_CANCELLED || e.kind == event_kind::LEASE_TIMED_OUT) {
    waits_ended_.fetch_add(1, std::memory_order_relaxed);
  }
  if (kept_kind(e.kind)) {
    scoped_lock lock{mutex_};
    if (kept_.size() < max_events_) {
      kept_.push_back(e);
    }
  }
  if (e.task.value == 0) {
    return;
  }
  scoped_lock lock{mutex_};
  auto& lane = lanes_[e.task.value];
  switch (e.kind) {
    case event_kind::SEMAPHORE_ACQUIRED:
      lane.held_since = e.time;
      lane.semaphore_wait += e.duration;
      ++lane.acquires;
      break;
    case event_kind::SEMAPHORE_RELEASED:
      if (lane.held_since && lane.held.size() < max_events_) {
        lane.held.emplace_back(*lane.held_since, e.time);
      }
      lane.held_since.reset();
      break;
    case event_kind::LEASE_GRANTED:
      ++lane.leases;
      lane.lease_waits += e.duration.count() > 0 ? 1U : 0U;
      break;
    case event_kind::LEASE_LENT:
      lane.lent_bytes += e.bytes;
      if (e.other_task.value != 0) {
        lanes_[e.other_task.value].borrowed_bytes += e.bytes;
      }
      break;
    case event_kind::LEASE_WHOLE_DEVICE:
      ++lane.whole_device;
      break;
    case event_kind::OOM_SPILLED:
      ++lane.oom_spills;
      break;
    case event_kind::OOM_RETRY:
      ++lane.retries;
      break;
    case event_kind::OOM_SPLIT:
      ++lane.splits;
      break;
    default:
      break;
  }
}

std::map<std::uint64_t, run_recorder::counting_sink::task_lane> run_recorder::counting_sink::lanes()
  const {
  scoped_lock lock{mutex_};
  return lanes_;
}

std::size_t run_recorder::counting_sink::count(event_kind kind) const noexcept {
  return counts_[static_cast<std::size_t>(kind) % KINDS].load(std::memory_order_relaxed);
}

std::size_t run_recorder::counting_sink::bytes(event_kind kind) const noexcept {
  return bytes_[static_cast<std::size_t>(kind) % KINDS].load(std::memory_order_relaxed);
}

std::size_t run_recorder::counting_sink::waits_ended() const noexcept {
  return waits_ended_.load(std::memory_order_relaxed);
}

std::vector<event> run_recorder::counting_sink::kept() const {
  scoped_lock lock{mutex_};
  return kept_;
}

// ----- run_recorder -----

run_recorder::run_recorder(run_gauges gauges, run_recorder_options options)
  : gauges_(std::move(gauges)),
    options_(std::move(options)),
    origin_(std::chrono::steady_clock::now()),
    sink_(options_.max_events),
    interval_(options_.interval) {}

run_recorder::~run_recorder() {
  {
    scoped_lock lock{mutex_};
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void run_recorder::start() {
  sample_now();
  scoped_lock lock{mutex_};
  if (options_.interval.count() > 0 && !thread_.joinable() && !stopping_) {
    thread_ = std::thread([this] { run_thread(); });
  }
}

void run_recorder::stop() {
  {
    scoped_lock lock{mutex_};
    if (stopped_) {
      return;
    }
    stopped_  = true;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
  sample_now();
}

run_sample run_recorder::sample_now() {
  scoped_lock lock{mutex_};
  auto sample = take_sample();
  samples_.push_back(sample);
  if (options_.max_samples >= 2 && samples_.size() > options_.max_samples) {
    // Keep the first sample and every other one after it; sample half as often from now on.
    std::size_t kept = 1;
    for (std::size_t i = 2; i < samples_.size(); i += 2) {
      samples_[kept++] = samples_[i];
    }
    samples_.resize(kept);
    interval_ *= 2;
  }
  return sample;
}

void run_recorder::run_thread() {
  scoped_lock lock{mutex_};
  while (!stopping_) {
    auto const period = interval_;
    wake_.wait_for(lock.native(), period, [this]() SPILLWAY_REQUIRES(mutex_) { return stopping_; });
    if (stopping_) {
      break;
    }
    lock.unlock();
    sample_now();
    lock.lock();
  }
}

run_sample run_recorder::take_sample() const {
  run_sample s;
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_).count();
  s.device_bytes   = read_gauge(gauges_.device_bytes);
  s.host_bytes     = read_gauge(gauges_.host_bytes);
  s.disk_bytes     = read_gauge(gauges_.disk_bytes);
  s.leases_granted = gauges_.leases_granted
                       ? gauges_.leases_granted()
                       : saturating_sub(sink_.count(event_kind::LEASE_GRANTED),
                                        sink_.count(event_kind::LEASE_RETURNED));
  s.leases_waiting =
    gauges_.leases_waiting
      ? gauges_.leases_waiting()
      : saturating_sub(sink_.count(event_kind::LEASE_WAIT_BEGIN), sink_.waits_ended());
  s.rows_done  = read_gauge(gauges_.rows_done);
  s.bytes_done = read_gauge(gauges_.bytes_done);
  s.spilled    = sink_.count(event_kind::SPILLED);
  s.unspilled  = sink_.count(event_kind::UNSPILLED);
  s.retries    = sink_.count(event_kind::OOM_RETRY);
  s.splits     = sink_.count(event_kind::OOM_SPLIT);
  s.spill_failures =
    sink_.count(event_kind::SPILL_WRITE_FAILED) + sink_.count(event_kind::SPILL_READ_FAILED);
  s.spilled_bytes   = sink_.bytes(event_kind::SPILLED);
  s.unspilled_bytes = sink_.bytes(event_kind::UNSPILLED);
  return s;
}

std::vector<run_sample> run_recorder::samples() const {
  scoped_lock lock{mutex_};
  return samples_;
}

std::size_t run_recorder::count(event_kind kind) const noexcept { return sink_.count(kind); }

std::string run_recorder::to_json() const {
  auto const samples = this->samples();
  nlohmann::ordered_json series;
  auto column = [&](char const* name, auto field) {
    auto values = nlohmann::ordered_json::array();
    for (auto const& s : samples) {
      values.push_back(s.*field);
    }
    series[name] = std::move(values);
  };
  column("seconds", &run_sample::seconds);
  column("device", &run_sample::device_bytes);
  column("host", &run_sample::host_bytes);
  column("disk", &run_sample::disk_bytes);
  column("leases_granted", &run_sample::leases_granted);
  column("leases_waiting", &run_sample::leases_waiting);
  column("rows", &run_sample::rows_done);
  column("bytes", &run_sample::bytes_done);
  column("spilled", &run_sample::spilled);
  column("unspilled", &run_sample::unspilled);
  column("retries", &run_sample::retries);
  column("splits", &run_sample::splits);
  column("spill_failures", &run_sample::spill_failures);
  column("spilled_bytes", &run_sample::spilled_bytes);
  column("unspilled_bytes", &run_sample::unspilled_bytes);

  nlohmann::ordered_json counts = nlohmann::ordered_json::object();
  for (auto kind : ALL_KINDS) {
    counts[std::string{to_string(kind)}] = {{"count", sink_.count(kind)},
                                            {"bytes", sink_.bytes(kind)}};
  }

  auto timeline = nlohmann::ordered_json::array();
  for (auto const& e : sink_.kept()) {
    nlohmann::ordered_json item{
      {"seconds", std::chrono::duration<double>(e.time - origin_).count()},
      {"kind", std::string{to_string(e.kind)}},
      {"bytes", e.bytes}};
    if (e.kind == event_kind::SPILLED || e.kind == event_kind::UNSPILLED) {
      auto const from = static_cast<std::size_t>(std::clamp<std::int64_t>(e.value / 4, 0, 3));
      auto const to   = static_cast<std::size_t>(std::clamp<std::int64_t>(e.value % 4, 0, 3));
      item["from"]    = std::string{TIER_NAMES[from]};
      item["to"]      = std::string{TIER_NAMES[to]};
      item["duration_seconds"] = std::chrono::duration<double>(e.duration).count();
    }
    timeline.push_back(std::move(item));
  }

  auto const seconds_at = [&](std::chrono::steady_clock::time_point at) {
    return std::chrono::duration<double>(at - origin_).count();
  };
  auto tasks = nlohmann::ordered_json::array();
  for (auto const& [id, lane] : sink_.lanes()) {
    auto held = nlohmann::ordered_json::array();
    for (auto const& [from, to] : lane.held) {
      held.push_back({seconds_at(from), seconds_at(to)});
    }
    tasks.push_back(
      {{"task", id},
       {"semaphore_held", std::move(held)},
       {"semaphore_acquires", lane.acquires},
       {"semaphore_wait_seconds", std::chrono::duration<double>(lane.semaphore_wait).count()},
       {"leases", lane.leases},
       {"lease_waits", lane.lease_waits},
       {"lent_bytes", lane.lent_bytes},
       {"borrowed_bytes", lane.borrowed_bytes},
       {"whole_device", lane.whole_device},
       {"spills", lane.oom_spills},
       {"retries", lane.retries},
       {"splits", lane.splits}});
  }

  std::size_t kept_total = 0;
  for (auto kind : ALL_KINDS) {
    kept_total += kept_kind(kind) ? sink_.count(kind) : 0;
  }
  nlohmann::ordered_json report{
    {"title", options_.title},
    {"duration_seconds", samples.empty() ? 0.0 : samples.back().seconds - samples.front().seconds},
    {"samples", samples.size()},
    {"series", std::move(series)},
    {"event_counts", std::move(counts)},
    {"events", std::move(timeline)},
    {"tasks", std::move(tasks)},
    {"events_dropped", kept_total > options_.max_events},
  };
  return report.dump(1);
}

std::string run_recorder::to_html() const {
  auto samples = this->samples();
  if (samples.empty()) {
    samples.push_back(run_sample{});
  }
  std::ostringstream out;
  out << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>"
      << html_escape(options_.title) << "</title>\n<style>\n"
      << "body{font-family:sans-serif;margin:24px;color:#222}"
      << "section.chart{margin-bottom:24px}h2{font-size:16px;margin:8px 0}"
      << "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;"
         "text-align:right}th{text-align:left}\n"
      << "</style>\n</head>\n<body>\n<h1>" << html_escape(options_.title) << "</h1>\n";
  auto const& last = samples.back();
  out << "<p>" << samples.size() << " samples over "
      << fixed(last.seconds - samples.front().seconds, 2) << " s; " << last.rows_done << " rows, "
      << html_escape(format_bytes(last.bytes_done)) << "; spilled "
      << html_escape(format_bytes(last.spilled_bytes)) << " in " << last.spilled
      << " moves, unspilled " << html_escape(format_bytes(last.unspilled_bytes)) << " in "
      << last.unspilled << " moves; " << last.retries << " retries, " << last.splits
      << " splits.</p>\n";
  for (auto const& spec : chart_specs()) {
    write_chart(out, spec, samples);
  }
  write_task_lanes(out, sink_.lanes(), origin_, samples.back().seconds);
  out << "<h2>Event counts</h2>\n<table class=\"events\">\n<tr><th>event</th><th>count</th>"
         "<th>bytes</th></tr>\n";
  for (auto kind : ALL_KINDS) {
    out << "<tr><th>" << to_string(kind) << "</th><td>" << sink_.count(kind) << "</td><td>"
        << html_escape(format_bytes(sink_.bytes(kind))) << "</td></tr>\n";
  }
  out << "</table>\n";
  // The same data as JSON, for tools; "</" is escaped so the script element cannot end early.
  std::string json = to_json();
  std::string safe;
  safe.reserve(json.size());
  for (std::size_t i = 0; i < json.size(); ++i) {
    if (json[i] == '<' && i + 1 < json.size() && json[i + 1] == '/') {
      safe += "<\\/";
      ++i;
    } else {
      safe += json[i];
    }
  }
  out << "<script type=\"application/json\" id=\"run-data\">\n" << safe << "\n</script>\n";
  out << "</body>\n</html>\n";
  return out.str();
}

void run_recorder::write_run_report(std::filesystem::path const& html_path,
                                    std::filesystem::path const& json_path) const {
  auto write = [](std::filesystem::path const& path, std::string const& text) {
    std::ofstream file{path, std::ios::binary | std::ios::trunc};
    file << text;
    file.close();
    if (!file) {
      throw io_error("cannot write the run report '" + path.string() + "'");
    }
  };
  write(html_path, to_html());
  write(json_path, to_json());
}

}  // namespace spillway
