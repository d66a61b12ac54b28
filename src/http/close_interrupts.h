// While alive, the client closing its side of the connection interrupts
// `target` (a process follower, a terminal: anything with Interrupt()):
// cancellation reaches the process, not only the socket. Every streaming
// handler that follows a process holds one for the stream's lifetime.
#pragma once

#include <memory>

#include "http/http_context.h"

namespace hutch::api {

class CloseInterrupts {
 public:
  template <class T>
  CloseInterrupts(HttpContext& ctx, std::weak_ptr<T> target) : ctx_(ctx) {
    ctx_.WatchClose([target = std::move(target)] {
      if (auto p = target.lock()) p->Interrupt();
    });
  }
  ~CloseInterrupts() { ctx_.StopWatchingClose(); }
  CloseInterrupts(const CloseInterrupts&) = delete;
  CloseInterrupts& operator=(const CloseInterrupts&) = delete;

 private:
  HttpContext& ctx_;
};

}  // namespace hutch::api
