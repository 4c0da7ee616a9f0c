#pragma once
// Recorded device work: a backend that can record the work one call of a
// function enqueues (CUDA graphs) returns a DeviceGraph that enqueues it
// again, with the same kernels, arguments and addresses, at a fraction of the
// host cost. Whatever the recorded work reads must therefore live at fixed
// addresses and only its contents may change between replays.

#include <functional>
#include <memory>

namespace hyllm {

class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  virtual void replay() = 0;
  // False once memory the recording points into has moved (a backend's
  // scratch arena grew); the owner then records the work again.
  virtual bool valid() const = 0;
};

// Records the device work of one call of `body` (which is not executed on
// the device: replay() runs it). Throws when the work cannot be recorded.
using GraphRecorder = std::function<std::unique_ptr<DeviceGraph>(const std::function<void()>& body)>;

}  // namespace hyllm
