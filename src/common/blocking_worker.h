// BlockingWorker: one thread of its own for blocking calls that an
// io_context's coroutines await — syscalls that can wait on kernel locks
// for milliseconds (creating a network namespace, rtnetlink requests under
// the rtnl lock, an RCU grace period in a cgroup v1 attach) — so the
// io_context's thread keeps serving requests meanwhile. With one thread
// (the default) calls run one at a time, in the order they came; with more
// they run side by side (for calls that mostly sleep in the kernel and do
// not depend on each other). The result is handed back on the awaiting
// coroutine's executor.
//
// Also used for CPU work that would hold the I/O thread up for long
// (encoding a big blocking exec answer, api/common/exec_answer).
//
// A call must not touch state the io_context's thread owns: give it copies.
// The owner destroys the worker from the io_context's thread or after it
// stopped: the running call finishes (its result is then never delivered
// if the io_context no longer runs), calls not started are dropped.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <type_traits>
#include <utility>

namespace hutch {

class BlockingWorker {
 public:
  explicit BlockingWorker(boost::asio::io_context& io, int threads = 1)
      : io_(&io), pool_(static_cast<size_t>(threads)) {}
  // Without an io_context: the awaiting coroutine's executor is kept busy
  // (its run() does not return) while a call is out.
  explicit BlockingWorker(int threads = 1) : pool_(static_cast<size_t>(threads)) {}
  ~BlockingWorker() {
    pool_.stop();
    pool_.join();
  }
  BlockingWorker(const BlockingWorker&) = delete;
  BlockingWorker& operator=(const BlockingWorker&) = delete;

  // Runs `f()` on a worker thread and forgets it: for calls whose end the
  // caller learns of another way. The destructor waits for it like any.
  template <typename F>
  void Post(F f) {
    boost::asio::post(pool_, std::move(f));
  }

  // Runs `f()` on the worker's thread; resumes with its result.
  template <typename F>
  boost::asio::awaitable<std::invoke_result_t<F&>> Run(F f) {
    using R = std::invoke_result_t<F&>;
    auto init = [this, f = std::move(f)](auto handler) mutable {
      // Counted as work until the result is posted back: the io_context's
      // run() does not return while a call is out.
      auto work = boost::asio::prefer(
          io_ ? boost::asio::any_io_executor(io_->get_executor())
              : boost::asio::any_io_executor(boost::asio::get_associated_executor(handler)),
          boost::asio::execution::outstanding_work.tracked);
      boost::asio::post(
          pool_, [f = std::move(f), h = std::move(handler), work = std::move(work)]() mutable {
            R r = f();
            auto ex = boost::asio::get_associated_executor(h, work);
            boost::asio::post(
                ex, [h = std::move(h), r = std::move(r)]() mutable { std::move(h)(std::move(r)); });
            work = boost::asio::any_io_executor();
          });
    };
    co_return co_await boost::asio::async_initiate<const boost::asio::use_awaitable_t<>&, void(R)>(
        std::move(init), boost::asio::use_awaitable);
  }

 private:
  boost::asio::io_context* io_ = nullptr;
  boost::asio::thread_pool pool_;
};

}  // namespace hutch
