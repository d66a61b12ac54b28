// DnsProxy over loopback: a sandbox client on 127.0.0.2, an unknown one on
// 127.0.0.3, and an upstream on 127.0.0.9 played by the test thread.
#include <gtest/gtest.h>
#include <ldns/ldns.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <mutex>
#include <thread>

#include "net/dns_proxy.h"

using namespace hutch::net;
namespace asio = boost::asio;
using asio::ip::udp;

namespace {

std::vector<uint8_t> Query(const char* name, ldns_rr_type type) {
  ldns_pkt* p = nullptr;
  EXPECT_EQ(ldns_pkt_query_new_frm_str(&p, name, type, LDNS_RR_CLASS_IN, LDNS_RD), LDNS_STATUS_OK);
  ldns_pkt_set_id(p, 5);
  uint8_t* buf = nullptr;
  size_t n = 0;
  EXPECT_EQ(ldns_pkt2wire(&buf, p, &n), LDNS_STATUS_OK);
  std::vector<uint8_t> out(buf, buf + n);
  free(buf);
  ldns_pkt_free(p);
  return out;
}

int Rcode(const std::vector<uint8_t>& w) { return w.size() >= 4 ? (w[3] & 0x0f) : -1; }

struct Fixture : ::testing::Test {
  asio::io_context io;
  asio::io_context io_up;  // blocking sockets of the test thread
  udp::socket upstream{io_up, udp::endpoint(asio::ip::make_address("127.0.0.9"), 0)};
  std::mutex mu;
  std::vector<std::string> resolved;
  std::unique_ptr<DnsProxy> proxy;
  uint16_t port = 0;
  std::thread th;
  double queries_per_second = 200;

  void SetUp() override {
    DnsProxyOptions o;
    o.upstream = upstream.local_endpoint();
    o.queries_per_second = queries_per_second;
    o.upstream_timeout = std::chrono::milliseconds(500);
    proxy = std::make_unique<DnsProxy>(
        io, o,
        [](const asio::ip::address& a) -> std::optional<DnsPolicy> {
          if (a.to_string() != "127.0.0.2") return std::nullopt;
          DnsPolicy p;
          p.allow = {"allowed.test"};
          return p;
        },
        [this](const asio::ip::address&, const std::string& name,
               std::vector<asio::ip::address_v4> addrs, uint32_t ttl) -> asio::awaitable<void> {
          std::lock_guard<std::mutex> g(mu);
          resolved.push_back(name + "=" + addrs.at(0).to_string() + "/" + std::to_string(ttl));
          co_return;
        });
    auto r = proxy->AddListener(asio::ip::make_address("127.0.0.1"), 0);
    ASSERT_TRUE(r.ok()) << r.error().message;
    port = *r;
    th = std::thread([this] {
      auto guard = asio::make_work_guard(io);
      io.run();
    });
  }
  void TearDown() override {
    io.stop();
    if (th.joinable()) th.join();
  }

  udp::socket Client(const char* from) {
    udp::socket s(io_up, udp::endpoint(asio::ip::make_address(from), 0));
    return s;
  }
  std::vector<uint8_t> Ask(udp::socket& s, const std::vector<uint8_t>& q) {
    s.send_to(asio::buffer(q), udp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    std::vector<uint8_t> buf(4096);
    size_t n = s.receive(asio::buffer(buf));
    buf.resize(n);
    return buf;
  }
};

// A proxy that lets each client 5 queries a second (burst 10).
struct SlowFixture : Fixture {
  SlowFixture() { queries_per_second = 5; }
};

}  // namespace

// A client flooding its resolver gets its burst answered and the rest
// dropped; another client keeps its own budget.
TEST_F(SlowFixture, QueriesOverAClientsRateAreDropped) {
  auto c = Client("127.0.0.2");
  const auto q = Query("denied.test.", LDNS_RR_TYPE_A);
  for (int i = 0; i < 40; ++i)
    c.send_to(asio::buffer(q), udp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  // Answers until none came for half a second.
  c.non_blocking(true);
  int answers = 0;
  std::vector<uint8_t> buf(4096);
  auto quiet_since = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - quiet_since < std::chrono::milliseconds(500)) {
    boost::system::error_code ec;
    if (c.receive(asio::buffer(buf), 0, ec) > 0 && !ec) {
      ++answers;
      quiet_since = std::chrono::steady_clock::now();
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  EXPECT_GE(answers, 10);
  EXPECT_LT(answers, 40);
  EXPECT_GE(proxy->stats().rate_limited, 40u - static_cast<uint64_t>(answers));
  auto u = Client("127.0.0.3");
  EXPECT_EQ(Rcode(Ask(u, Query("allowed.test.", LDNS_RR_TYPE_A))), LDNS_RCODE_REFUSED);
}

TEST_F(Fixture, DeniedUnknownMalformedAndTimeout) {
  auto c = Client("127.0.0.2");
  EXPECT_EQ(Rcode(Ask(c, Query("denied.test.", LDNS_RR_TYPE_A))), LDNS_RCODE_NXDOMAIN);
  EXPECT_EQ(Rcode(Ask(c, Query("allowed.test.", LDNS_RR_TYPE_AAAA))), LDNS_RCODE_NOERROR);
  auto u = Client("127.0.0.3");
  EXPECT_EQ(Rcode(Ask(u, Query("allowed.test.", LDNS_RR_TYPE_A))), LDNS_RCODE_REFUSED);
  std::vector<uint8_t> junk = {0xff, 0x00, 0x01};
  c.send_to(asio::buffer(junk), udp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  // Upstream never answers: SERVFAIL after the timeout, and the malformed
  // packet before it got no answer (the next reply is this one).
  EXPECT_EQ(Rcode(Ask(c, Query("allowed.test.", LDNS_RR_TYPE_A))), LDNS_RCODE_SERVFAIL);
}

TEST_F(Fixture, ForwardsAllowedAndReportsAddresses) {
  auto c = Client("127.0.0.2");
  auto q = Query("allowed.test.", LDNS_RR_TYPE_A);
  c.send_to(asio::buffer(q), udp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  std::vector<uint8_t> buf(4096);
  udp::endpoint from;
  size_t n = upstream.receive_from(asio::buffer(buf), from);
  ldns_pkt* p = nullptr;
  ASSERT_EQ(ldns_wire2pkt(&p, buf.data(), n), LDNS_STATUS_OK);
  ldns_pkt_set_qr(p, true);
  ldns_rr* rr = nullptr;
  ASSERT_EQ(ldns_rr_new_frm_str(&rr, "allowed.test. 120 IN A 10.0.0.7", 0, nullptr, nullptr),
            LDNS_STATUS_OK);
  ldns_pkt_push_rr(p, LDNS_SECTION_ANSWER, rr);
  uint8_t* w = nullptr;
  size_t wn = 0;
  ASSERT_EQ(ldns_pkt2wire(&w, p, &wn), LDNS_STATUS_OK);
  upstream.send_to(asio::buffer(w, wn), from);
  free(w);
  ldns_pkt_free(p);
  size_t m = c.receive(asio::buffer(buf));
  buf.resize(m);
  EXPECT_EQ(Rcode(buf), LDNS_RCODE_NOERROR);
  std::lock_guard<std::mutex> g(mu);
  ASSERT_EQ(resolved.size(), 1u);
  EXPECT_EQ(resolved[0], "allowed.test=10.0.0.7/120");
}

TEST_F(Fixture, TcpQueryAnswered) {
  asio::ip::tcp::socket s(io_up);
  s.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  auto q = Query("denied.test.", LDNS_RR_TYPE_A);
  std::vector<uint8_t> f = {static_cast<uint8_t>(q.size() >> 8),
                            static_cast<uint8_t>(q.size() & 0xff)};
  f.insert(f.end(), q.begin(), q.end());
  asio::write(s, asio::buffer(f));
  uint8_t len[2];
  asio::read(s, asio::buffer(len));
  std::vector<uint8_t> r((len[0] << 8) | len[1]);
  asio::read(s, asio::buffer(r));
  // The TCP client is 127.0.0.1: no sandbox there, so REFUSED.
  EXPECT_EQ(Rcode(r), LDNS_RCODE_REFUSED);
}
