// ReplySplitter — separates a model's reply into reasoning and content as its tokens stream in,
// using the format's reasoning markers (Gemma 4: `<|channel>thought\n ... <channel|>`):
//   * tokens between `open` and `close` are reasoning; the channel label after `open`
//     ("thought\n") is dropped; everything else is content;
//   * a stray `close` without `open`, or an empty extra block, just switches to content;
//   * each channel has its own UTF-8 decoder (whole characters only, invalid bytes -> U+FFFD).
// The reasoning controller of issue 9 counts reasoning tokens the same way (reasoning_tokens()).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "generate/text_model.h"

namespace boltrt {

class ReplySplitter {
 public:
  enum class Channel { kContent, kReasoning };
  struct Piece {
    Channel channel;
    std::string text;
  };

  // `starts_in_reasoning`: the prompt already opened the reasoning block (and its label).
  explicit ReplySplitter(std::optional<ReasoningMarkers> markers, bool starts_in_reasoning = false);

  // Feeds one generated token and its bytes; returns the text released, in order.
  std::vector<Piece> push(int32_t token, std::string_view bytes);
  // Releases what is left (an unfinished character becomes U+FFFD).
  std::vector<Piece> finish();

  // Cuts the text at a stop string that ended generation: in the content when it is there,
  // otherwise in the reasoning (generation then stopped before any content).
  void truncate_at(const std::string& stop);

  // Whether a prompt leaves the model inside an open reasoning block (its last marker is
  // `open`), e.g. a template that pre-opens the thought channel.
  static bool prompt_opens_reasoning(std::span<const int32_t> prompt,
                                     const std::optional<ReasoningMarkers>& markers);

  Channel channel() const { return channel_; }
  const std::string& reasoning() const { return reasoning_; }
  const std::string& content() const { return content_; }
  int64_t reasoning_tokens() const { return reasoning_tokens_; }

 private:
  void flush_channel(bool final, std::vector<Piece>& out);
  void append(std::string_view decoded, std::vector<Piece>& out);

  std::optional<ReasoningMarkers> markers_;
  Channel channel_ = Channel::kContent;
  std::string undecoded_;     // bytes of an unfinished character in the current channel
  size_t label_matched_ = 0;  // bytes of the channel label seen so far (reasoning only)
  bool label_done_ = true;
  std::string reasoning_, content_;
  int64_t reasoning_tokens_ = 0;
};

}  // namespace boltrt
