// Issue 32, finding 5: a file name made inside the sandbox went unescaped
// into the E2B download's Content-Disposition; a name holding CR LF added
// headers (Set-Cookie, anything) to the client's response. Names now go
// through one encoder (src/common/header_value.h): an ASCII fallback with
// unsafe bytes replaced, and the exact name in RFC 5987's filename*.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "tests/support/shared_server.h"

namespace {

std::string PercentEncode(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '/' || c == '.' || c == '-' || c == '_') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

class Headers : public hutch::testing::SharedServerTest {
 protected:
  static void SetUpTestSuite() {
    SharedServerTest::SetUpTestSuite();
    if (sandbox().empty()) return;
    auto t = server().Client().Request("GET", "/e2b/sandboxes/" + sandbox(), "",
                                       {{"X-API-Key", server().key()}});
    token_ = t.json().is_object() ? t.json().value("envdAccessToken", "") : "";
  }
  // Makes /home/user/<name> from inside the sandbox (as a workload would)
  // and downloads it through E2B's GET /files.
  static hutch::client::Response DownloadThroughE2b(const std::string& name) {
    std::string hex;
    for (unsigned char c : name) {
      static const char* kHex = "0123456789abcdef";
      hex += kHex[c >> 4];
      hex += kHex[c & 0xf];
    }
    auto made = Exec("python3 -c \"import os; open(b'/home/user/' + bytes.fromhex('" + hex +
                     "'), 'w').write('payload')\" && echo made");
    EXPECT_EQ(hutch::testing::StdoutOf(made), "made\n") << made.dump();
    auto c = server().Client();
    return c.Request("GET", "/e2b/files?path=" + PercentEncode("/home/user/" + name), "",
                     {{"E2b-Sandbox-Id", sandbox()}, {"X-Access-Token", token_}});
  }
  static inline std::string token_;
};

TEST_F(Headers, AFileNameWithCrLfInjectsNoHeaderIntoAnE2bDownload) {
  ASSERT_FALSE(token_.empty()) << "no envd access token";
  const std::string name = "a\r\nSet-Cookie: x=1\r\nX-Injected: yes";
  auto r = DownloadThroughE2b(name);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "payload");
  EXPECT_EQ(r.header("set-cookie"), "");
  EXPECT_EQ(r.header("x-injected"), "");
  const std::string cd = r.header("content-disposition");
  EXPECT_EQ(cd.find('\r'), std::string::npos) << cd;
  EXPECT_EQ(cd.find('\n'), std::string::npos) << cd;
  // The name round-trips, byte for byte, in filename*.
  EXPECT_NE(cd.find("filename*=UTF-8''a%0D%0ASet-Cookie%3A%20x%3D1%0D%0AX-Injected%3A%20yes"),
            std::string::npos)
      << cd;
  EXPECT_NE(cd.find("filename=\"a__Set-Cookie: x=1__X-Injected: yes\""), std::string::npos) << cd;
}

TEST_F(Headers, QuotesAndNonAsciiNamesRoundTripInFilenameStar) {
  ASSERT_FALSE(token_.empty()) << "no envd access token";
  auto r = DownloadThroughE2b("r\xC3\xA9sum\xC3\xA9 \"q\".txt");
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string cd = r.header("content-disposition");
  EXPECT_NE(cd.find("filename*=UTF-8''r%C3%A9sum%C3%A9%20%22q%22.txt"), std::string::npos) << cd;
  EXPECT_NE(cd.find("filename=\"r__sum__ _q_.txt\""), std::string::npos) << cd;
}

}  // namespace
