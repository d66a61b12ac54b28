#include "api/common/exec_answer.h"

#include <nlohmann/json.hpp>

#include "api/common/exec_body.h"
#include "api/common/utf8.h"

namespace hutch::api {

namespace {

// Raw bytes encoded per call on the worker: small enough to keep the memory
// of an answer in flight low, big enough that the hops cost little.
constexpr size_t kEncodeBatch = 256 << 10;

// Encodes one stream's bytes piece by piece: JSON escapes for text (which
// is valid UTF-8 as a whole, so a piece may end inside a character: the
// escaper passes such bytes through), base64 with the 0-2 bytes that do
// not make a whole group carried to the next piece.
class StreamEncoder {
 public:
  explicit StreamEncoder(bool text) : text_(text) {}
  void Add(std::string_view bytes, std::string* out) {
    if (text_) return AppendJsonEscaped(out, bytes);
    if (!carry_.empty()) {
      const size_t take = std::min(3 - carry_.size(), bytes.size());
      carry_.append(bytes.substr(0, take));
      bytes.remove_prefix(take);
      if (carry_.size() < 3) return;
      out->append(Base64Encode(carry_));
      carry_.clear();
    }
    const size_t whole = bytes.size() / 3 * 3;
    out->append(Base64Encode(bytes.substr(0, whole)));
    carry_.assign(bytes.substr(whole));
  }
  void Finish(std::string* out) {
    if (!carry_.empty()) out->append(Base64Encode(carry_));
    carry_.clear();
  }

 private:
  bool text_;
  std::string carry_;
};

// `{...exit fields...` without its closing brace.
std::string Head(const ExitInfo& exit, const KeptOutput& out, const KeptOutput& err) {
  nlohmann::json j = ExitJson(exit);
  j["truncated"] = out.truncated() || err.truncated();
  j["stdout_truncated"] = out.truncated();
  j["stderr_truncated"] = err.truncated();
  j["stdout_bytes"] = out.total();
  j["stderr_bytes"] = err.total();
  std::string s = j.dump();
  s.pop_back();
  return s;
}

// `,"stdout":"` or `,"stdout":"","stdout_b64":"`: what precedes the bytes.
std::string FieldOpen(const char* name, const KeptOutput& k) {
  std::string s = std::string(",\"") + name + "\":\"";
  if (!k.text()) s += std::string("\",\"") + name + "_b64\":\"";
  return s;
}

}  // namespace

asio::awaitable<void> SendExecAnswer(HttpContext& ctx, BlockingWorker& worker, const ExitInfo& exit,
                                     KeptOutput& out, KeptOutput& err, OutputBudget::Lease& lease) {
  out.Finish();
  err.Finish();
  std::string head = Head(exit, out, err);
  const std::pair<const char*, KeptOutput*> streams[] = {{"stdout", &out}, {"stderr", &err}};

  if (out.encoded_size() + err.encoded_size() <= kExecAnswerInline) {
    std::string body = std::move(head);
    for (auto [name, k] : streams) {
      body += FieldOpen(name, *k);
      StreamEncoder enc(k->text());
      for (auto& chunk : k->TakeChunks(SIZE_MAX)) enc.Add(chunk, &body);
      enc.Finish(&body);
      body += '"';
    }
    body += "}\n";
    co_return co_await ctx.SendText(200, "application/json", std::move(body));
  }

  if (!(co_await ctx.BeginStream(200, "application/json", -1)).ok()) co_return;
  if (!(co_await ctx.WriteChunk(head)).ok()) co_return;
  for (auto [name, k] : streams) {
    if (!(co_await ctx.WriteChunk(FieldOpen(name, *k))).ok()) co_return;
    // The worker uses these while this coroutine waits for it, and only
    // then. The call captures references only: GCC 12 miscompiles a
    // by-move init-capture in a lambda built inside a co_await expression
    // (the moved-from copy is destroyed too: a double free under ASan).
    StreamEncoder enc(k->text());
    std::string encoded;
    std::vector<std::string> batch;
    while (!k->empty()) {
      batch = k->TakeChunks(kEncodeBatch);
      co_await worker.Run([&enc, &encoded, &batch] {
        encoded.clear();
        for (auto& chunk : batch) {
          enc.Add(chunk, &encoded);
          std::string().swap(chunk);  // freed as soon as it is encoded
        }
        return true;
      });
      if (!(co_await ctx.WriteChunk(encoded)).ok()) co_return;
      lease.Release(encoded.size());
    }
    std::string().swap(encoded);
    std::string tail;
    enc.Finish(&tail);
    tail += '"';
    if (!(co_await ctx.WriteChunk(tail)).ok()) co_return;
  }
  if (!(co_await ctx.WriteChunk("}\n")).ok()) co_return;
  (void)co_await ctx.EndStream();
}

}  // namespace hutch::api
