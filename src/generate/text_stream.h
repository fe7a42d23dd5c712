// TextStream — turns the byte pieces of generated tokens into printable text as they arrive.
//
//  * Only whole UTF-8 characters are released; a character split across tokens waits for its
//    last byte. Invalid bytes become U+FFFD (one per maximal invalid subsequence, as WHATWG and
//    Python's errors="replace" do), so the output is always valid UTF-8.
//  * Stop strings are matched on the decoded text, across token boundaries. Text that could be
//    the beginning of a stop string is held back until it is known not to be one, so no part of
//    a stop string is ever released.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace boltrt {

class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stop_strings = {});

  // Appends the bytes of one token. Returns the text that can be released now (possibly
  // empty). After a stop string was found, returns only the text before it, and every later
  // call returns "".
  std::string push(std::string_view bytes);

  // End of generation: an unfinished UTF-8 character becomes U+FFFD, held-back text is
  // released. Returns the remaining text.
  std::string finish();

  bool stopped() const { return stopped_; }
  // The stop string that ended the text ("" when none did).
  const std::string& matched_stop() const { return matched_stop_; }
  // Everything released so far.
  const std::string& text() const { return released_; }

 private:
  std::string release_checked(bool final);

  std::vector<std::string> stops_;
  std::string undecoded_;  // bytes of an unfinished UTF-8 character
  std::string held_;       // decoded text not released yet
  std::string released_;
  std::string matched_stop_;
  bool stopped_ = false;
};

// Decodes as much of `bytes` as forms whole UTF-8 characters (invalid bytes -> U+FFFD) and
// appends it to `out`. Returns how many bytes were consumed; the rest is an unfinished but so
// far valid character. With `final`, nothing is left: an unfinished character becomes U+FFFD.
size_t decode_utf8_replacing(std::string_view bytes, bool final, std::string& out);

}  // namespace boltrt
