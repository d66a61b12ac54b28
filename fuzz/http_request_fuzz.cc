// The HTTP/1.1 request head as hutchd parses it: Beast's request parser
// with hutchd's header limit, then the target through ParseRequestTarget.
// Also a chunked body through a string body parser with a small limit.
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>

#include "http/request_target.h"

namespace http = boost::beast::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    http::request_parser<http::empty_body> p;
    p.header_limit(64 * 1024);
    p.eager(false);
    boost::system::error_code ec;
    p.put(boost::asio::buffer(data, size), ec);
    if (p.is_header_done()) {
      auto target = p.get().target();
      auto t = hutch::api::ParseRequestTarget(std::string_view(target.data(), target.size()));
      (void)hutch::api::PathSegments(t.path);
      (void)p.get().keep_alive();
      (void)p.content_length();
      (void)p.chunked();
    }
  }
  {
    http::request_parser<http::string_body> p;
    p.header_limit(64 * 1024);
    p.body_limit(1 << 16);
    p.eager(true);
    boost::system::error_code ec;
    size_t off = 0;
    while (off < size && !ec && !p.is_done()) {
      size_t used = p.put(boost::asio::buffer(data + off, size - off), ec);
      if (ec == http::error::need_more || used == 0) break;
      off += used;
    }
  }
  return 0;
}
