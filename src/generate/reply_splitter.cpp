#include "generate/reply_splitter.h"

#include "generate/text_stream.h"

namespace boltrt {

ReplySplitter::ReplySplitter(std::optional<ReasoningMarkers> markers, bool starts_in_reasoning)
    : markers_(std::move(markers)) {
  if (starts_in_reasoning && markers_) channel_ = Channel::kReasoning;
}

void ReplySplitter::append(std::string_view decoded, std::vector<Piece>& out) {
  if (decoded.empty()) return;
  (channel_ == Channel::kReasoning ? reasoning_ : content_).append(decoded);
  if (!out.empty() && out.back().channel == channel_) {
    out.back().text.append(decoded);
  } else {
    out.push_back({channel_, std::string(decoded)});
  }
}

void ReplySplitter::flush_channel(bool final, std::vector<Piece>& out) {
  std::string decoded;
  const size_t used = decode_utf8_replacing(undecoded_, final, decoded);
  undecoded_.erase(0, used);
  append(decoded, out);
}

std::vector<ReplySplitter::Piece> ReplySplitter::push(int32_t token, std::string_view bytes) {
  std::vector<Piece> out;
  if (markers_ && (token == markers_->open || token == markers_->close)) {
    flush_channel(true, out);
    channel_ = token == markers_->open ? Channel::kReasoning : Channel::kContent;
    label_matched_ = 0;
    label_done_ = channel_ != Channel::kReasoning || markers_->label.empty();
    return out;
  }
  if (channel_ == Channel::kReasoning) ++reasoning_tokens_;
  std::string_view rest = bytes;
  if (!label_done_) {
    // Drop the label while the bytes match it; on a mismatch the matched part is reasoning.
    const std::string& label = markers_->label;
    while (!rest.empty() && label_matched_ < label.size() &&
           rest.front() == label[label_matched_]) {
      rest.remove_prefix(1);
      ++label_matched_;
    }
    if (label_matched_ == label.size()) {
      label_done_ = true;
    } else if (!rest.empty()) {
      undecoded_.append(label, 0, label_matched_);
      label_done_ = true;
    }
  }
  undecoded_.append(rest);
  flush_channel(false, out);
  return out;
}

std::vector<ReplySplitter::Piece> ReplySplitter::finish() {
  std::vector<Piece> out;
  if (!label_done_) undecoded_.insert(0, markers_->label, 0, label_matched_);
  label_done_ = true;
  flush_channel(true, out);
  return out;
}

void ReplySplitter::truncate_at(const std::string& stop) {
  if (stop.empty()) return;
  if (const auto at = content_.find(stop); at != std::string::npos) {
    content_.resize(at);
  } else if (const auto in_reasoning = reasoning_.find(stop); in_reasoning != std::string::npos) {
    reasoning_.resize(in_reasoning);
    content_.clear();
  }
}

bool ReplySplitter::prompt_opens_reasoning(std::span<const int32_t> prompt,
                                           const std::optional<ReasoningMarkers>& markers) {
  if (!markers) return false;
  for (auto it = prompt.rbegin(); it != prompt.rend(); ++it) {
    if (*it == markers->close) return false;
    if (*it == markers->open) return true;
  }
  return false;
}

}  // namespace boltrt
