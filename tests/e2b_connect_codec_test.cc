// The codec edge of envd's Connect calls (src/api/e2b/connect_codec): a
// binary protobuf request reads as the same proto3 JSON its JSON form
// gives the handlers, an answer encodes in either codec, the media types
// that name no codec are refused (the caller's 415), and bytes that are no
// message of the method's type are Connect's invalid_argument.
#include <gtest/gtest.h>

#include "api/e2b/connect_codec.h"
#include "api/e2b/connect_envelope.h"
#include "api/e2b/gzip_stream.h"
#include "api/e2b/json_message.h"
#include "api/e2b/proto/filesystem.pb.h"
#include "api/e2b/proto/process.pb.h"

namespace hutch::api::e2b {
namespace {

ConnectCodec Codec(ConnectCodecKind kind, const char* service, const char* method) {
  const auto* m = ConnectCodec::FindMethod(service, method);
  EXPECT_NE(m, nullptr) << service << "/" << method;
  return ConnectCodec(kind, m);
}

Json DecodeOk(const ConnectCodec& c, std::string_view payload) {
  auto r = c.DecodeRequest(payload);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : Json();
}

std::string Encode(const ConnectCodec& c, const Json& message) {
  auto r = c.EncodeResponse(message);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : std::string();
}

TEST(ConnectCodec, KnowsEveryEnvdMethodAndWhichOnesStream) {
  for (const char* m : {"List", "Connect", "Start", "Update", "StreamInput", "SendInput",
                        "SendSignal", "CloseStdin"})
    EXPECT_NE(ConnectCodec::FindMethod("process.Process", m), nullptr) << m;
  for (const char* m : {"Stat", "MakeDir", "Move", "ListDir", "Remove", "WatchDir", "CreateWatcher",
                        "GetWatcherEvents", "RemoveWatcher"})
    EXPECT_NE(ConnectCodec::FindMethod("filesystem.Filesystem", m), nullptr) << m;
  EXPECT_TRUE(ConnectCodec::FindMethod("process.Process", "Start")->server_streaming());
  EXPECT_TRUE(ConnectCodec::FindMethod("filesystem.Filesystem", "WatchDir")->server_streaming());
  EXPECT_FALSE(ConnectCodec::FindMethod("process.Process", "List")->server_streaming());
  EXPECT_EQ(ConnectCodec::FindMethod("process.Process", "Nope"), nullptr);
  EXPECT_EQ(ConnectCodec::FindMethod("other.Service", "Start"), nullptr);
}

TEST(ConnectCodec, MediaTypesNameTheCodecForUnaryAndStreamingCalls) {
  EXPECT_EQ(ConnectCodec::KindOf("application/json", false), ConnectCodecKind::kJson);
  EXPECT_EQ(ConnectCodec::KindOf("application/proto", false), ConnectCodecKind::kProto);
  EXPECT_EQ(ConnectCodec::KindOf("application/connect+json", true), ConnectCodecKind::kJson);
  EXPECT_EQ(ConnectCodec::KindOf("application/connect+proto", true), ConnectCodecKind::kProto);
  // Anything else is refused before the body is read: the caller's 415.
  EXPECT_FALSE(ConnectCodec::KindOf("application/xml", false));
  EXPECT_FALSE(ConnectCodec::KindOf("application/grpc", false));
  EXPECT_FALSE(ConnectCodec::KindOf("application/connect+proto", false));
  EXPECT_FALSE(ConnectCodec::KindOf("application/proto", true));
  EXPECT_FALSE(ConnectCodec::KindOf("", true));
  EXPECT_STREQ(Codec(ConnectCodecKind::kProto, "process.Process", "Start").ContentType(true),
               "application/connect+proto");
  EXPECT_STREQ(Codec(ConnectCodecKind::kProto, "process.Process", "List").ContentType(false),
               "application/proto");
}

TEST(ConnectCodec, ProtobufStartRequestDecodesAsItsJsonForm) {
  process::StartRequest req;
  req.mutable_process()->set_cmd("/bin/bash");
  req.mutable_process()->add_args("-l");
  req.mutable_process()->add_args("-c");
  req.mutable_process()->add_args("echo hi");
  (*req.mutable_process()->mutable_envs())["FOO"] = "bar";
  req.mutable_process()->set_cwd("/tmp");
  req.set_stdin(false);  // optional: present although false
  const std::string json_form =
      R"({"process":{"cmd":"/bin/bash","args":["-l","-c","echo hi"],"envs":{"FOO":"bar"},)"
      R"("cwd":"/tmp"},"stdin":false})";
  const Json from_proto = DecodeOk(Codec(ConnectCodecKind::kProto, "process.Process", "Start"),
                                   req.SerializeAsString());
  const Json from_json =
      DecodeOk(Codec(ConnectCodecKind::kJson, "process.Process", "Start"), json_form);
  EXPECT_EQ(from_proto, from_json);
  // An unset optional stays absent (the handler's "stdin on by default").
  req.clear_stdin();
  EXPECT_FALSE(
      DecodeOk(Codec(ConnectCodecKind::kProto, "process.Process", "Start"), req.SerializeAsString())
          .contains("stdin"));
}

TEST(ConnectCodec, ProtobufRequestsKeepSelectorsBytesEnumsAndPty) {
  const auto send = Codec(ConnectCodecKind::kProto, "process.Process", "SendInput");
  process::SendInputRequest in;
  in.mutable_process()->set_pid(42);
  in.mutable_input()->set_stdin(std::string("a\0b", 3));
  EXPECT_EQ(DecodeOk(send, in.SerializeAsString()),
            Json::parse(R"({"process":{"pid":42},"input":{"stdin":"YQBi"}})"));

  const auto signal = Codec(ConnectCodecKind::kProto, "process.Process", "SendSignal");
  process::SendSignalRequest sig;
  sig.mutable_process()->set_pid(7);
  sig.set_signal(process::SIGNAL_SIGKILL);
  EXPECT_EQ(DecodeOk(signal, sig.SerializeAsString()),
            Json::parse(R"({"process":{"pid":7},"signal":"SIGNAL_SIGKILL"})"));

  const auto start = Codec(ConnectCodecKind::kProto, "process.Process", "Start");
  process::StartRequest pty;
  pty.mutable_process()->set_cmd("/bin/bash");
  pty.mutable_pty()->mutable_size()->set_cols(80);
  pty.mutable_pty()->mutable_size()->set_rows(24);
  EXPECT_EQ(DecodeOk(start, pty.SerializeAsString())["pty"],
            Json::parse(R"({"size":{"cols":80,"rows":24}})"));

  const auto list = Codec(ConnectCodecKind::kProto, "filesystem.Filesystem", "ListDir");
  filesystem::ListDirRequest ls;
  ls.set_path("/home/user");
  ls.set_depth(2);
  EXPECT_EQ(DecodeOk(list, ls.SerializeAsString()),
            DecodeOk(Codec(ConnectCodecKind::kJson, "filesystem.Filesystem", "ListDir"),
                     R"({"path":"/home/user","depth":2})"));
  // An empty body is the empty message in both codecs.
  EXPECT_EQ(DecodeOk(Codec(ConnectCodecKind::kProto, "process.Process", "List"), ""),
            Json::object());
  EXPECT_EQ(DecodeOk(Codec(ConnectCodecKind::kJson, "process.Process", "List"), ""),
            Json::object());
}

TEST(ConnectCodec, MalformedProtobufIsInvalidArgument) {
  const auto start = Codec(ConnectCodecKind::kProto, "process.Process", "Start");
  // Field 1 (process) announced as 100 bytes long, 2 present.
  auto r = start.DecodeRequest(std::string("\x0a\x64\x0a\x00", 4));
  ASSERT_FALSE(r.ok());
  EXPECT_STREQ(ConnectCodeName(r.error().code), "invalid_argument");
  EXPECT_NE(r.error().message.find("process.StartRequest"), std::string::npos);
  // JSON where protobuf is announced is no message either.
  EXPECT_FALSE(start.DecodeRequest(R"({"process":{"cmd":"x"}})").ok());
  // And the JSON codec's own malformed input.
  auto bad = Codec(ConnectCodecKind::kJson, "process.Process", "Start").DecodeRequest("{nope");
  ASSERT_FALSE(bad.ok());
  EXPECT_STREQ(ConnectCodeName(bad.error().code), "invalid_argument");
  auto arr = Codec(ConnectCodecKind::kJson, "process.Process", "Start").DecodeRequest("[]");
  ASSERT_FALSE(arr.ok());
  EXPECT_STREQ(ConnectCodeName(arr.error().code), "invalid_argument");
}

TEST(ConnectCodec, StreamEventsEncodeInBothCodecs) {
  const Json data = Json::parse(R"({"event":{"data":{"stdout":"aGkK"}}})");
  const Json end =
      Json::parse(R"({"event":{"end":{"exitCode":-1,"exited":false,"status":"signal: killed"}}})");
  const auto json_codec = Codec(ConnectCodecKind::kJson, "process.Process", "Start");
  EXPECT_EQ(Json::parse(Encode(json_codec, data)), data);

  const auto proto_codec = Codec(ConnectCodecKind::kProto, "process.Process", "Start");
  process::StartResponse got;
  ASSERT_TRUE(got.ParseFromString(Encode(proto_codec, data)));
  EXPECT_EQ(got.event().data().stdout(), "hi\n");
  ASSERT_TRUE(got.ParseFromString(Encode(proto_codec, end)));
  EXPECT_EQ(got.event().end().exit_code(), -1);
  EXPECT_EQ(got.event().end().status(), "signal: killed");
  ASSERT_TRUE(
      got.ParseFromString(Encode(proto_codec, Json::parse(R"({"event":{"keepalive":{}}})"))));
  EXPECT_TRUE(got.event().has_keepalive());
}

TEST(ConnectCodec, UnaryAnswersEncodeInBothCodecs) {
  const Json stat =
      Json::parse(R"({"entry":{"name":"a.txt","type":"FILE_TYPE_FILE","path":"/home/user/a.txt",)"
                  R"("size":"12","mode":420,"permissions":"-rw-r--r--",)"
                  R"("modifiedTime":"2026-12-04T10:00:00Z","symlinkTarget":"/x"}})");
  const auto json_codec = Codec(ConnectCodecKind::kJson, "filesystem.Filesystem", "Stat");
  EXPECT_EQ(Json::parse(Encode(json_codec, stat)), stat);
  const auto proto_codec = Codec(ConnectCodecKind::kProto, "filesystem.Filesystem", "Stat");
  filesystem::StatResponse got;
  ASSERT_TRUE(got.ParseFromString(Encode(proto_codec, stat)));
  EXPECT_EQ(got.entry().name(), "a.txt");
  EXPECT_EQ(got.entry().type(), filesystem::FILE_TYPE_FILE);
  EXPECT_EQ(got.entry().size(), 12);
  EXPECT_EQ(got.entry().mode(), 420u);
  EXPECT_EQ(got.entry().modified_time().seconds(), 1796378400);
  EXPECT_EQ(got.entry().symlink_target(), "/x");

  const Json procs = Json::parse(
      R"({"processes":[{"config":{"cmd":"/bin/bash","args":["-l"],"cwd":"/tmp"},"pid":9}]})");
  process::ListResponse list;
  ASSERT_TRUE(list.ParseFromString(
      Encode(Codec(ConnectCodecKind::kProto, "process.Process", "List"), procs)));
  ASSERT_EQ(list.processes_size(), 1);
  EXPECT_EQ(list.processes(0).pid(), 9u);
  EXPECT_EQ(list.processes(0).config().cwd(), "/tmp");
  // An empty answer ({}) is zero bytes in protobuf.
  EXPECT_EQ(
      Encode(Codec(ConnectCodecKind::kProto, "process.Process", "CloseStdin"), Json::object()), "");
}

TEST(JsonToMessage, FollowsProto3JsonForEveryShapeEnvdUses) {
  process::ListResponse list;
  const Json procs = Json::parse(
      R"({"processes":[{"config":{"cmd":"sh","args":["-c","x"],"envs":{"A":"1","B":"2"},)"
      R"("cwd":null},"pid":"12","tag":"t"},{"pid":13}]})");
  ASSERT_TRUE(JsonToMessage(procs, &list).ok());
  ASSERT_EQ(list.processes_size(), 2);
  EXPECT_EQ(list.processes(0).pid(), 12u);  // a number as a string, as parsers must accept
  EXPECT_EQ(list.processes(0).config().args(1), "x");
  EXPECT_EQ(list.processes(0).config().envs().at("B"), "2");
  EXPECT_FALSE(list.processes(0).config().has_cwd());  // null: the default
  EXPECT_EQ(list.processes(0).tag(), "t");
  EXPECT_EQ(list.processes(1).pid(), 13u);
  // Values the handlers build from C++ ints are signed in nlohmann::json.
  Json built = {{"processes", Json::array({Json{{"pid", int{14}}}})}};
  ASSERT_TRUE(JsonToMessage(built, &list).ok());
  EXPECT_EQ(list.processes(2).pid(), 14u);
  built["processes"][0]["pid"] = int{-1};
  EXPECT_FALSE(JsonToMessage(built, &list).ok());

  filesystem::StatResponse stat;
  ASSERT_TRUE(JsonToMessage(Json::parse(R"({"entry":{"type":2,"size":5,"modified_time":)"
                                        R"("1970-01-01T00:00:01.5Z","symlinkTarget":"/t"}})"),
                            &stat)
                  .ok());
  EXPECT_EQ(stat.entry().type(), filesystem::FILE_TYPE_DIRECTORY);  // an enum by number
  EXPECT_EQ(stat.entry().size(), 5);                                // int64 as a number
  EXPECT_EQ(stat.entry().modified_time().nanos(), 500000000);       // the proto field name
  EXPECT_EQ(stat.entry().symlink_target(), "/t");

  process::StartResponse data;
  ASSERT_TRUE(JsonToMessage(Json::parse(R"({"event":{"data":{"stderr":"_-8"}}})"), &data).ok());
  EXPECT_EQ(data.event().data().stderr(), "\xff\xef");  // URL-safe base64 too
}

TEST(JsonToMessage, RefusesWhatTheMessageCannotHold) {
  process::ListResponse list;
  for (const char* bad :
       {R"({"nope":1})", R"({"processes":{}})", R"({"processes":[{"pid":-1}]})",
        R"({"processes":[{"pid":"x"}]})", R"({"processes":[{"config":"sh"}]})", R"([])"})
    EXPECT_FALSE(JsonToMessage(Json::parse(bad), &list).ok()) << bad;
  filesystem::StatResponse stat;
  EXPECT_FALSE(JsonToMessage(Json::parse(R"({"entry":{"type":"FILE_TYPE_NOPE"}})"), &stat).ok());
  EXPECT_FALSE(JsonToMessage(Json::parse(R"({"entry":{"modifiedTime":"yesterday"}})"), &stat).ok());
  process::StartResponse data;
  EXPECT_FALSE(JsonToMessage(Json::parse(R"({"event":{"data":{"stdout":"!!"}}})"), &data).ok());
}

TEST(ConnectCodec, AnAnswerThatDoesNotFitItsTypeIsInternal) {
  const auto c = Codec(ConnectCodecKind::kProto, "process.Process", "List");
  auto r = c.EncodeResponse(Json::parse(R"({"processes":[{"pid":1,"bogus":true}]})"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Code::kInternal);
}

TEST(ConnectCodec, GzipMessagesInflateWithinTheLimit) {
  GzipDeflater d;
  std::string z = d.Feed(R"({"path":"/tmp"})");
  z += d.Finish();
  auto small = GunzipBounded(z, 1024);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(*small, R"({"path":"/tmp"})");
  GzipDeflater big;
  std::string bomb = big.Feed(std::string(1 << 20, 'a'));
  bomb += big.Finish();
  auto r = GunzipBounded(bomb, 64 * 1024);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Code::kPayloadTooLarge);
  EXPECT_FALSE(GunzipBounded(z.substr(0, z.size() / 2), 1024).ok());
  EXPECT_FALSE(GunzipBounded("not gzip", 1024).ok());
}

}  // namespace
}  // namespace hutch::api::e2b
