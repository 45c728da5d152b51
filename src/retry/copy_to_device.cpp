#include <spillway/retry/copy_to_device.hpp>
#include <spillway/table/copy.hpp>

#include <utility>

namespace spillway {

std::vector<std::unique_ptr<table>> copy_to_device(table_input batch,
                                                   oom_coordinator& coordinator,
                                                   task_context& task,
                                                   stream_view stream,
                                                   resource_ref device,
                                                   retry_counts* counted) {
  return with_retry(
    coordinator,
    task,
    std::move(batch),
    [&](table_input& piece) { return copy(piece.materialize(), stream, device); },
    split_in_half<table_input>,
    counted);
}

std::vector<std::unique_ptr<table>> copy_to_device(std::unique_ptr<table> batch,
                                                   oom_coordinator& coordinator,
                                                   task_context& task,
                                                   stream_view stream,
                                                   resource_ref device,
                                                   retry_counts* counted) {
  return copy_to_device(table_input{std::shared_ptr<table const>{std::move(batch)}},
                        coordinator,
                        task,
                        stream,
                        device,
                        counted);
}

}  // namespace spillway
