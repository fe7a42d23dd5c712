#include "runtime/multi_sequence.h"

#include <utility>

namespace boltrt {

InterleavedSessions::InterleavedSessions(std::vector<std::unique_ptr<LanguageModel>> sessions)
    : sessions_(std::move(sessions)) {
  if (sessions_.empty()) fail("batch: no sessions");
}

void InterleavedSessions::decode(std::span<DecodeItem> items) {
  for (DecodeItem& item : items) {
    try {
      LanguageModel& session = *sessions_.at(item.slot);
      item.logits = session.decode(item.tokens, item.all_logits);
      item.taps = session.taps();
    } catch (...) {
      item.error = std::current_exception();
    }
  }
}

}  // namespace boltrt
