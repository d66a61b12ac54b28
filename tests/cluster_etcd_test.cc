// The etcd client of src/cluster against a real etcd (one member on
// loopback, tests/support/etcd_process.h): leases, puts under a lease,
// prefix ranges, the guarded transactions placement and id records stand
// on, and failing over to the next endpoint when one is down.
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include "cluster/etcd_client.h"
#include "tests/support/etcd_process.h"

namespace hutch::cluster {
namespace {

using testing::EtcdProcess;

// Runs one coroutine to its end on a fresh io_context.
template <class F>
void RunCoro(F&& f) {
  asio::io_context io;
  asio::co_spawn(io, std::forward<F>(f)(io), asio::detached);
  io.run();
}

TEST(ClusterEtcd, LeasePutRangeTxnAndFailover) {
  if (!EtcdProcess::Available())
    GTEST_SKIP() << "no /usr/bin/etcd (scripts/setup installs etcd-server)";
  EtcdProcess etcd;
  ASSERT_TRUE(etcd.ok());
  bool done = false;
  RunCoro([&](asio::io_context& io) -> asio::awaitable<void> {
    // A dead endpoint first: the client moves on to the live one.
    EtcdClient c(io.get_executor(), {"http://127.0.0.1:1", etcd.url()});
    auto lease = co_await c.Grant(5);
    EXPECT_TRUE(lease.ok()) << (lease.ok() ? "" : lease.error().message);
    if (!lease.ok()) co_return;
    EXPECT_TRUE((co_await c.Put("/t/nodes/a", "{\"x\":1}", *lease)).ok());
    EXPECT_TRUE((co_await c.Put("/t/nodes/b", "two")).ok());
    EXPECT_TRUE((co_await c.Put("/t/nodesX", "outside the prefix")).ok());
    auto kvs = co_await c.Prefix("/t/nodes/");
    EXPECT_TRUE(kvs.ok());
    if (kvs.ok()) {
      EXPECT_EQ(kvs->size(), 2u);
      if (kvs->size() == 2) {
        EXPECT_EQ((*kvs)[0].key, "/t/nodes/a");
        EXPECT_EQ((*kvs)[0].value, "{\"x\":1}");
        EXPECT_EQ((*kvs)[0].lease, *lease);
        EXPECT_EQ((*kvs)[1].value, "two");
      }
    }
    auto ttl = co_await c.KeepAlive(*lease);
    EXPECT_TRUE(ttl.ok());
    if (ttl.ok()) {
      EXPECT_GT(*ttl, 0);
    }

    // Created once: the second txn finds the key and does nothing.
    const auto put = [](std::string key, std::string value) {
      return std::vector<TxnOp>{{TxnOp::Kind::kPut, std::move(key), std::move(value), 0}};
    };
    auto first = co_await c.TxnIfAbsent("/t/id", put("/t/id", "n1"));
    auto second = co_await c.TxnIfAbsent("/t/id", put("/t/id", "n2"));
    EXPECT_TRUE(first.ok() && *first);
    EXPECT_TRUE(second.ok() && !*second);
    auto id = co_await c.Get("/t/id");
    EXPECT_TRUE(id.ok() && *id && (*id)->value == "n1");

    // Optimistic concurrency on a version: a stale version loses.
    auto v0 = co_await c.TxnIfVersion("/t/seq", 0, put("/t/seq", "1"));
    auto stale = co_await c.TxnIfVersion("/t/seq", 0, put("/t/seq", "2"));
    auto v1 = co_await c.TxnIfVersion("/t/seq", 1, put("/t/seq", "3"));
    EXPECT_TRUE(v0.ok() && *v0);
    EXPECT_TRUE(stale.ok() && !*stale);
    EXPECT_TRUE(v1.ok() && *v1);

    // Revoking the lease takes the key under it; the lease is gone.
    EXPECT_TRUE((co_await c.Revoke(*lease)).ok());
    auto gone = co_await c.Get("/t/nodes/a");
    EXPECT_TRUE(gone.ok() && !*gone);
    auto after = co_await c.KeepAlive(*lease);
    EXPECT_TRUE(after.ok() && *after == 0);
    EXPECT_TRUE((co_await c.Delete("/t/nodes/b")).ok());
    auto none = co_await c.Get("/t/nodes/b");
    EXPECT_TRUE(none.ok() && !*none);
    done = true;
  });
  EXPECT_TRUE(done);
}

TEST(ClusterEtcd, EndpointsAreCheckedAndDownIsUnavailable) {
  EXPECT_FALSE(EtcdClient::ParseEndpoints("").ok());
  EXPECT_FALSE(EtcdClient::ParseEndpoints("unix://a:2379").ok());
  EXPECT_TRUE(EtcdClient::ParseEndpoints("https://a:2379").ok());
  EXPECT_FALSE(EtcdClient::ParseEndpoints("https://a").ok());
  EXPECT_FALSE(EtcdClient::ParseEndpoints("http://a").ok());
  auto two = EtcdClient::ParseEndpoints("http://a:1,b:2");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->size(), 2u);
  Code code = Code::kInternal;
  RunCoro([&](asio::io_context& io) -> asio::awaitable<void> {
    EtcdClient c(io.get_executor(), {"http://127.0.0.1:1"});
    auto r = co_await c.Get("/x");
    if (!r.ok()) code = r.error().code;
  });
  EXPECT_EQ(code, Code::kUnavailable);
}

// https:// to an etcd that asks for client certificates: with the CA and
// a client certificate the calls go through; without the certificate,
// or trusting another CA, they fail (nothing is written).
TEST(ClusterEtcd, SpeaksTlsWithAClientCertificate) {
  if (!EtcdProcess::Available()) GTEST_SKIP() << "no /usr/bin/etcd";
  EtcdProcess etcd(1, /*tls=*/true);
  ASSERT_TRUE(etcd.ok());
  ASSERT_EQ(etcd.url().rfind("https://", 0), 0u);
  const EtcdTls good{etcd.ca(), etcd.client_cert(), etcd.client_key()};
  EXPECT_TRUE(EtcdClient::CheckTls(good).ok());
  EXPECT_FALSE(EtcdClient::CheckTls({etcd.ca(), etcd.client_cert(), ""}).ok());
  bool done = false;
  RunCoro([&](asio::io_context& io) -> asio::awaitable<void> {
    EtcdClient c(io.get_executor(), {etcd.url()}, good);
    EXPECT_TRUE((co_await c.Put("/tls/k", "v")).ok());
    auto got = co_await c.Get("/tls/k");
    EXPECT_TRUE(got.ok() && *got && (*got)->value == "v");
    auto lease = co_await c.Grant(5);
    EXPECT_TRUE(lease.ok());
    if (lease.ok()) {
      auto ttl = co_await c.KeepAlive(*lease);
      EXPECT_TRUE(ttl.ok() && *ttl > 0);
    }
    EtcdClient no_cert(io.get_executor(), {etcd.url()}, {etcd.ca(), "", ""});
    EXPECT_FALSE((co_await no_cert.Put("/tls/k", "other")).ok());
    // The system's trust store does not know the test CA.
    EtcdClient no_ca(io.get_executor(), {etcd.url()}, {"", etcd.client_cert(), etcd.client_key()});
    EXPECT_FALSE((co_await no_ca.Put("/tls/k", "other")).ok());
    auto still = co_await c.Get("/tls/k");
    EXPECT_TRUE(still.ok() && *still && (*still)->value == "v");
    done = true;
  });
  EXPECT_TRUE(done);
}

}  // namespace
}  // namespace hutch::cluster
