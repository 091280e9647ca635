// CheckPayloadAgainstFlatc (fuzz_checks.h): walbus's payload check against
// the verifier flatc generates, on payloads of differential_payload.fbs.
#include <flatbuffers/flexbuffers.h>

#include <cstring>
#include <random>
#include <string>
#include <string_view>

#include "bus/core/payload_contract.h"
#include "bus/util/hex.h"
#include "differential_payload_bfbs_generated.h"
#include "differential_payload_generated.h"
#include "tests/fuzz/fuzz_checks.h"
#include "tools/walbus/payload_text.h"

namespace walbus::fuzz {
namespace {

namespace rich = ::fuzz::rich;

// A payload in a failure message: hex, at most 4 KiB of it.
std::string Hex(std::string_view bytes) { return internal::HexEncode(bytes.substr(0, 4096)); }

// ---- Random payloads, built with the generated object API -----------------

class PayloadMaker {
 public:
  explicit PayloadMaker(uint64_t seed) : random_(seed) {}

  std::string Make() {
    std::unique_ptr<rich::RichT> root = MakeRich(0);
    flatbuffers::FlatBufferBuilder b;
    b.Finish(rich::Rich::Pack(b, root.get()), rich::RichIdentifier());
    return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
  }

 private:
  uint32_t Below(uint32_t n) { return static_cast<uint32_t>(random_() % n); }
  bool Often() { return Below(4) != 0; }
  std::string Text() { return std::string(Below(6), static_cast<char>('a' + Below(26))); }
  double Real() {
    static constexpr double kReals[] = {0.0, -0.0, 1.5, 1e-310, 1e300, 0.1, -7.25, 1.0 / 3};
    return kReals[Below(8)];
  }
  rich::Point MakePoint() { return rich::Point(static_cast<float>(Real()), Real()); }

  // NONE only alone: the object API cannot pack it in a vector.
  rich::PartUnion MakePart(bool alone) {
    rich::PartUnion part;
    switch (Below(4)) {
      case 0:
        if (!alone) part.Set(std::string("none"));
        break;
      case 1: {
        rich::LeafT leaf;
        leaf.name = Text();
        leaf.weight = Real();
        leaf.size = Below(2) != 0 ? rich::Size_Large : rich::Size_Small;
        part.Set(std::move(leaf));
        break;
      }
      case 2: part.Set(MakePoint()); break;
      default: part.Set(Text());
    }
    return part;
  }

  std::unique_ptr<rich::InnerT> MakeInner() {
    auto inner = std::make_unique<rich::InnerT>();
    inner->id = random_();
    for (uint32_t i = Below(4); i > 0; --i) inner->parts.push_back(MakePart(false));
    if (Often()) inner->note = Text();
    return inner;
  }

  std::vector<uint8_t> MakeFlex() {
    flexbuffers::Builder flex;
    flex.Map([&] {
      flex.Int("n", static_cast<int64_t>(random_()));
      flex.Double("d", Real());
      flex.String("s", Text());
      flex.Vector("v", [&] {
        for (uint32_t i = Below(5); i > 0; --i) flex.UInt(random_() >> Below(64));
      });
      flex.Bool("b", Often());
    });
    flex.Finish();
    return flex.GetBuffer();
  }

  std::unique_ptr<rich::RichT> MakeRich(int depth) {
    auto r = std::make_unique<rich::RichT>();
    r->key = Text();
    r->flags = static_cast<rich::Color>(Below(8));
    r->count = static_cast<int64_t>(random_());
    r->ratio = static_cast<float>(Real());
    if (Often()) r->maybe = static_cast<int32_t>(random_());
    r->flag = Often();
    if (Often()) r->at = std::make_unique<rich::Point>(MakePoint());
    if (Often()) r->box = std::make_unique<rich::Box>(static_cast<int8_t>(Below(256)));
    for (uint32_t i = Below(4); i > 0; --i) {
      auto leaf = std::make_unique<rich::LeafT>();
      leaf->name = Text();
      leaf->weight = Real();
      r->leaves.push_back(std::move(leaf));
    }
    for (uint32_t i = Below(4); i > 0; --i) r->names.push_back(Text());
    for (uint32_t i = Below(3); i > 0; --i) r->points.push_back(MakePoint());
    for (uint32_t i = Below(3); i > 0; --i) r->boxes.emplace_back(static_cast<int8_t>(Below(256)));
    for (uint32_t i = Below(4); i > 0; --i) r->numbers.push_back(random_());
    for (uint32_t i = Below(4); i > 0; --i) r->floats.push_back(static_cast<float>(Real()));
    for (uint32_t i = Below(5); i > 0; --i) r->signed_bytes.push_back(static_cast<int8_t>(Below(256)));
    r->part = MakePart(true);
    for (uint32_t i = Below(4); i > 0; --i) r->parts.push_back(MakePart(false));
    if (Often()) r->inner = MakeInner();
    if (Often()) {
      flatbuffers::FlatBufferBuilder nested;
      nested.Finish(rich::Inner::Pack(nested, MakeInner().get()));
      r->nested.assign(nested.GetBufferPointer(), nested.GetBufferPointer() + nested.GetSize());
    }
    if (Often()) r->flex = MakeFlex();
    if (depth < 3 && Below(3) == 0) r->next = MakeRich(depth + 1);
    return r;
  }

  std::mt19937_64 random_;
};

// ---- Reading a payload the way an application does -----------------------

// Every value of a FlexBuffer, as a reader visits them; at most `*budget`
// values (FlexBuffers may share values, and a visit does not know).
void Touch(flexbuffers::Reference value, int depth, size_t* budget) {
  if (*budget == 0 || depth > 64) return;
  --*budget;
  if (value.IsMap()) {
    const flexbuffers::Map map = value.AsMap();
    const flexbuffers::TypedVector keys = map.Keys();
    const flexbuffers::Vector values = map.Values();
    for (size_t i = 0; i < keys.size(); ++i) {
      (void)std::strlen(keys[i].AsKey());
      Touch(values[i], depth + 1, budget);
    }
  } else if (value.IsUntypedVector() || value.IsTypedVector() || value.IsFixedTypedVector()) {
    const flexbuffers::Vector vector = value.AsVector();
    for (size_t i = 0; i < vector.size(); ++i) Touch(vector[i], depth + 1, budget);
  } else if (value.IsString()) {
    (void)std::strlen(value.AsString().c_str());
  } else if (value.IsBlob()) {
    const flexbuffers::Blob blob = value.AsBlob();
    if (blob.size() != 0) (void)blob.data()[blob.size() - 1];
  } else if (value.IsFloat()) {
    (void)value.AsDouble();
  } else if (value.IsUInt() || value.IsBool()) {
    (void)value.AsUInt64();
  } else if (value.IsInt()) {
    (void)value.AsInt64();
  }
}

std::vector<uint64_t> AlignedCopy(const uint8_t* data, size_t size) {
  std::vector<uint64_t> copy(size / sizeof(uint64_t) + 1);
  std::memcpy(copy.data(), data, size);
  return copy;
}

// Reads every field through the generated accessors (UnPack reads them
// all), and the nested FlatBuffers and FlexBuffers of each table.
void ReadEverything(const rich::Rich* root) {
  const std::unique_ptr<rich::RichT> copy(root->UnPack());
  for (const rich::Rich* r = root; r != nullptr; r = r->next()) {
    if (r->nested() != nullptr) {
      // A nested buffer is aligned relative to its own start (as flatc
      // checks it), which its place in the outer one need not be: read
      // from an aligned copy, as FlatBuffers advises.
      const std::vector<uint64_t> aligned = AlignedCopy(r->nested()->data(), r->nested()->size());
      const std::unique_ptr<rich::InnerT> inner(flatbuffers::GetRoot<rich::Inner>(aligned.data())->UnPack());
    }
    if (r->flex() != nullptr) {
      size_t budget = 1 << 16;
      Touch(r->flex_flexbuffer_root(), 0, &budget);
    }
  }
}

// What walbus refuses on purpose though flatc's verifier accepts it
// (docs/contracts.md, "What the check adds to flatc's verifier").
bool ADocumentedRefusal(const std::string& message) {
  for (const char* rule : {"a union value without its type", "a union type without its value", "an offset to itself",
                           "elements are misaligned", "a value read as two types", "steps per byte to check",
                           "nested deeper than", "old_count"}) {
    if (message.find(rule) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

bool CheckPayloadAgainstFlatc(std::string_view bytes, std::string* why) {
  if (bytes.size() > kMaxInputBytes) return true;
  static const auto* contract = [] {
    auto schema = internal::BinarySchema::FromBytes(
        std::string(reinterpret_cast<const char*>(rich::RichBinarySchema::data()), rich::RichBinarySchema::size()));
    if (!schema.ok()) abort();
    auto made = internal::PayloadContract::Make("fuzz.rich.v1", 1, std::move(*schema));
    if (!made.ok()) abort();
    return new internal::PayloadContract(std::move(*made));
  }();

  // "G", eight bytes of seed, then mutations of three bytes each (where,
  // two bytes; what, one): a payload the object API builds, mutated.
  // Anything else is the payload itself.
  std::string payload;
  if (bytes.size() >= 9 && bytes[0] == 'G') {
    uint64_t seed = 0;
    std::memcpy(&seed, bytes.data() + 1, sizeof(seed));
    payload = PayloadMaker(seed).Make();
    for (size_t i = 9; i + 3 <= bytes.size(); i += 3) {
      const auto at =
          static_cast<size_t>(static_cast<unsigned char>(bytes[i]) | static_cast<unsigned char>(bytes[i + 1]) << 8);
      payload[at % payload.size()] = bytes[i + 2];
    }
  } else {
    payload.assign(bytes);
  }

  const Status walbus = contract->Verify(payload);
  const auto* data = reinterpret_cast<const uint8_t*>(payload.data());
  flatbuffers::Verifier verifier(data, payload.size());
  const bool flatc = rich::VerifyRichBuffer(verifier);
  if (walbus.ok() && !flatc) return Fail(why, "walbus accepts a payload flatc's verifier refuses: " + Hex(payload));
  if (!walbus.ok() && flatc && !ADocumentedRefusal(walbus.message())) {
    return Fail(why, "walbus refuses, for no documented reason, a payload flatc's verifier accepts: " +
                         walbus.message() + "\n" + Hex(payload));
  }
  if (!walbus.ok()) return true;
  ReadEverything(rich::GetRich(data));
  // Shown as JSON by the tools: JSON, whatever the payload.
  const std::string text = internal::PayloadText(contract->schema().schema(), payload);
  if (!text.empty() && !IsJsonDocument(text)) return Fail(why, "a payload shown as text that is not JSON: " + text);
  return true;
}

}  // namespace walbus::fuzz
