// The MCP layer's pure parts, root-free: JSON-RPC classification and the
// session table's bounds (who may find a session, what is evicted first,
// that ending a session stops what runs on it).
#include <gtest/gtest.h>

#include <set>

#include "api/mcp/mcp_protocol.h"
#include "api/mcp/mcp_sessions.h"
#include "api/mcp/mcp_tools.h"

using namespace hutch::api::mcp;

TEST(McpProtocol, ClassifiesRequestsNotificationsResponsesAndJunk) {
  EXPECT_EQ(Classify(json::parse(R"({"jsonrpc":"2.0","id":1,"method":"ping"})")).kind,
            Message::kRequest);
  EXPECT_EQ(Classify(json::parse(R"({"jsonrpc":"2.0","id":"a","method":"x","params":{}})")).kind,
            Message::kRequest);
  EXPECT_EQ(Classify(json::parse(R"({"jsonrpc":"2.0","method":"notifications/initialized"})")).kind,
            Message::kNotification);
  EXPECT_EQ(Classify(json::parse(R"({"jsonrpc":"2.0","id":3,"result":{}})")).kind,
            Message::kResponse);
  for (const char* bad :
       {R"([])", R"({"id":1,"method":"ping"})", R"({"jsonrpc":"1.0","method":"x"})",
        R"({"jsonrpc":"2.0","id":1.5,"method":"x"})", R"({"jsonrpc":"2.0","id":1,"method":7})",
        R"({"jsonrpc":"2.0","id":1,"method":"x","params":[1]})", R"({"jsonrpc":"2.0","id":1})"}) {
    auto m = Classify(json::parse(bad));
    EXPECT_EQ(m.kind, Message::kInvalid) << bad;
    EXPECT_FALSE(m.why.empty()) << bad;
  }
}

TEST(McpProtocol, RevisionsNewestFirst) {
  EXPECT_EQ(ProtocolVersions().front(), "2025-11-25");
  EXPECT_TRUE(SupportedVersion("2024-11-05"));
  EXPECT_FALSE(SupportedVersion("2025-13-01"));
  EXPECT_FALSE(SupportedVersion(""));
}

TEST(McpSessions, ASessionIsItsOwnersAndEndingItStopsItsRequests) {
  SessionTable t;
  auto s = t.Create("alice", "2025-06-18");
  EXPECT_EQ(t.Find(s->id(), "alice"), s);
  EXPECT_EQ(t.Find(s->id(), "bob"), nullptr);
  EXPECT_FALSE(t.Remove(s->id(), "bob"));
  int stopped = 0;
  s->Track("1", [&] { ++stopped; });
  s->Track("2", [&] { ++stopped; });
  s->Cancel("1");
  EXPECT_EQ(stopped, 1);
  s->Cancel("9");  // unknown: nothing
  EXPECT_EQ(stopped, 1);
  EXPECT_TRUE(t.Remove(s->id(), "alice"));
  EXPECT_EQ(stopped, 3);  // both in flight at the end
  EXPECT_TRUE(s->closed());
  EXPECT_EQ(t.Find(s->id(), "alice"), nullptr);
}

TEST(McpSessions, AnOwnerPastItsBoundLosesItsLeastRecentlyUsedSession) {
  SessionTable t;
  std::vector<std::shared_ptr<Session>> mine;
  for (size_t i = 0; i < SessionTable::kPerOwner; ++i) mine.push_back(t.Create("alice", "v"));
  auto other = t.Create("bob", "v");
  // Touch all but the first, so the first is the least recently used.
  for (size_t i = 1; i < mine.size(); ++i) ASSERT_NE(t.Find(mine[i]->id(), "alice"), nullptr);
  auto extra = t.Create("alice", "v");
  EXPECT_TRUE(mine[0]->closed());
  EXPECT_EQ(t.Find(mine[0]->id(), "alice"), nullptr);
  EXPECT_NE(t.Find(extra->id(), "alice"), nullptr);
  EXPECT_NE(t.Find(other->id(), "bob"), nullptr);  // another owner's are not touched
  std::set<std::string> ids;
  for (auto& s : mine) ids.insert(s->id());
  EXPECT_EQ(ids.size(), mine.size());  // ids do not repeat
}

TEST(McpTools, LossyUtf8KeepsTextAndReplacesBadBytes) {
  EXPECT_EQ(LossyUtf8("héllo"), "héllo");
  EXPECT_EQ(LossyUtf8(std::string("a\xff"
                                  "b",
                                  3)),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(LossyUtf8(std::string("\xc3", 1)), "\xEF\xBF\xBD");  // cut short at the end
  EXPECT_NO_THROW((void)json(LossyUtf8(std::string("\x80\x81\xfe", 3))).dump());
}

TEST(McpTools, TheListIsFilteredByTheKeysToolList) {
  hutch::auth::Principal all;
  EXPECT_TRUE(all.MayCallTool("exec"));
  hutch::auth::Principal some;
  some.mcp_tools = {"run"};
  EXPECT_TRUE(some.MayCallTool("run"));
  EXPECT_FALSE(some.MayCallTool("exec"));
  Tools tools(nullptr, nullptr);
  EXPECT_EQ(tools.List(all)["tools"].size(), Tools::Names().size());
  auto limited = tools.List(some)["tools"];
  ASSERT_EQ(limited.size(), 1u);
  EXPECT_EQ(limited[0]["name"], "run");
  // Every schema is an object schema naming its required arguments.
  const json every =
      tools.List(all)["tools"];  // a copy: range-for over a temporary's member dangles
  for (const auto& t : every) {
    EXPECT_EQ(t["inputSchema"]["type"], "object") << t["name"];
    for (const auto& r : t["inputSchema"].value("required", json::array()))
      EXPECT_TRUE(t["inputSchema"]["properties"].contains(r.get<std::string>())) << t["name"];
  }
}
