#include "api/common/kept_output.h"

#include <algorithm>

namespace hutch::api {

size_t KeptOutput::EncodedSize(size_t n, size_t escaped, bool utf8) {
  return utf8 && escaped <= 2 * n + 64 ? escaped : Base64Size(n);
}

size_t KeptOutput::encoded_size() const { return text_ ? escaped_ : Base64Size(n_); }

bool KeptOutput::Reserve(size_t size) {
  if (size <= leased_) return true;
  if (!lease_->TryGrow(size - leased_)) return false;
  leased_ = size;
  return true;
}

void KeptOutput::Add(std::string data) {
  total_ += data.size();
  if (truncated_ || data.empty()) return;
  Utf8Check after = utf8_;
  const size_t bad = after.Feed(data);
  const size_t escaped = JsonEscapedSize(data);
  const size_t whole = EncodedSize(n_ + data.size(), escaped_ + escaped, after.valid());
  if (whole <= cap_ && Reserve(whole)) {
    utf8_ = std::move(after);
    n_ += data.size();
    escaped_ += escaped;
    chunks_.push_back(std::move(data));
    return;
  }
  // The longest prefix within the cap and the budget's room; nothing after
  // it is kept, so the answer is a prefix of the output.
  truncated_ = true;
  const size_t budget_room = lease_->Room();
  const size_t room = budget_room >= cap_ ? cap_ : std::min(cap_, leased_ + budget_room);
  size_t keep = 0, keep_escaped = 0, e = 0;
  for (size_t k = 1; k <= data.size(); ++k) {
    e += JsonEscapedSize(std::string_view(data).substr(k - 1, 1));
    const bool utf8 = utf8_.valid() && (bad == std::string::npos || k <= bad);
    if (EncodedSize(n_ + k, escaped_ + e, utf8) > room) break;
    keep = k;
    keep_escaped = e;
  }
  if (keep == 0 ||
      !Reserve(EncodedSize(n_ + keep, escaped_ + keep_escaped,
                           utf8_.valid() && (bad == std::string::npos || keep <= bad))))
    return;
  data.resize(keep);
  utf8_.Feed(data);
  n_ += keep;
  escaped_ += keep_escaped;
  chunks_.push_back(std::move(data));
}

void KeptOutput::TrimBack(size_t bytes) {
  while (bytes > 0 && !chunks_.empty()) {
    std::string& last = chunks_.back();
    const size_t cut = std::min(bytes, last.size());
    escaped_ -= JsonEscapedSize(std::string_view(last).substr(last.size() - cut));
    last.resize(last.size() - cut);
    n_ -= cut;
    bytes -= cut;
    if (last.empty()) chunks_.pop_back();
  }
}

void KeptOutput::Finish() {
  // A cut in the middle of a character: the cut is moved back to its start,
  // so that text stays text.
  if (truncated_ && utf8_.valid() && utf8_.pending()) {
    TrimBack(utf8_.pending());
    utf8_.DropPending();
  }
  text_ = utf8_.complete() && escaped_ <= 2 * n_ + 64 && escaped_ <= cap_;
  if (text_) return;
  // Base64 can be bigger than what was counted while the output looked
  // like text (it ended inside a character): it must fit too.
  size_t limit = cap_;
  if (Base64Size(n_) > leased_ && !Reserve(Base64Size(n_))) limit = std::min(limit, leased_);
  if (Base64Size(n_) > limit) {
    TrimBack(n_ - limit / 4 * 3);
    truncated_ = true;
  }
}

std::vector<std::string> KeptOutput::TakeChunks(size_t max) {
  std::vector<std::string> out;
  size_t taken = 0;
  while (!chunks_.empty() && (out.empty() || taken + chunks_.front().size() <= max)) {
    taken += chunks_.front().size();
    out.push_back(std::move(chunks_.front()));
    chunks_.pop_front();
  }
  return out;
}

}  // namespace hutch::api
