#include "bus/core/payload_contract.h"

#include <flatbuffers/flexbuffers.h>
#include <flatbuffers/reflection_generated.h>

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <memory>
#include <unordered_map>

namespace walbus::internal {
namespace {

using reflection::BaseType;

// The smallest buffer flatc's verifier takes (its FLATBUFFERS_MIN_BUFFER_SIZE):
// a root offset, a table's vtable offset and a vtable's two sizes.
constexpr size_t kMinBufferBytes =
    sizeof(flatbuffers::uoffset_t) + sizeof(flatbuffers::soffset_t) + 2 * sizeof(flatbuffers::voffset_t);

// Where in the payload the walk is: a chain up to the root, turned into
// text ("orders.OrderApproved.lines[3].sku") only when something fails.
struct Where {
  const Where* up = nullptr;
  const char* name = nullptr;  // a field's name; null for an element
  int64_t index = -1;          // an element's index in its vector
};

std::string PathText(const Where* where) {
  if (where == nullptr) return std::string();
  std::string text = PathText(where->up);
  if (where->name != nullptr) {
    if (!text.empty()) text += '.';
    text += where->name;
  } else {
    text += "[" + std::to_string(where->index) + "]";
  }
  return text;
}

const flatbuffers::Table& AsTable(const uint8_t* p) { return *reinterpret_cast<const flatbuffers::Table*>(p); }

// Attribute `key` of `field`; null when it has none. Binary schemas hold
// the built-in ones (nested_flatbuffer, flexbuffer) when flatc wrote them
// with --bfbs-builtins, as walbus_add_event_schemas has it do.
const reflection::KeyValue* Attribute(const reflection::Field& field, const char* key) {
  return field.attributes() == nullptr ? nullptr : field.attributes()->LookupByKey(key);
}

// The shape of a FlexBuffer that FlexBuffers' verifier has passed with its
// reuse tracker (so every value in it is in bounds): no vector contains
// itself, and the depth and the count of vectors, as FlexBuffers' verifier
// counts them without the tracker (each path on its own; flatc's generated
// verifier runs it so), stay within its bounds (64 deep, one vector per
// byte). Each vector is measured once: linear in the buffer's size.
class FlexShape {
 public:
  explicit FlexShape(size_t size) : max_vectors_(size) {}

  // Null when the buffer rooted at `root` holds; why not otherwise.
  const char* Check(flexbuffers::Reference root) {
    const Measure m = Of(root, 0);
    if (m.cycle) return "a FlexBuffer with a vector that contains itself";
    if (m.height > kMaxFlexDepth) return "a FlexBuffer nested deeper than 64";
    if (m.vectors > max_vectors_) return "a FlexBuffer whose vectors, counted along every path, outnumber its bytes";
    return nullptr;
  }

 private:
  static constexpr uint64_t kMaxFlexDepth = 64;
  struct Measure {
    uint64_t height = 0;   // vectors on the deepest path
    uint64_t vectors = 0;  // vectors on every path, saturated
    bool cycle = false;
  };
  // A vector is its start and its width (the same bytes read at another
  // width are another vector), which FlexBuffers' classes keep protected.
  struct Key : flexbuffers::Vector {
    explicit Key(const flexbuffers::Vector& v) : flexbuffers::Vector(v) {}
    uintptr_t value() const { return reinterpret_cast<uintptr_t>(data_) * 16 + byte_width_; }
  };

  // `depth`: vectors above `r` on this path. This walk meets vectors in the
  // verifier's order, so its recursion is as deep as the verifier's first
  // visits (at most 64); past 64 it stops all the same, whatever the
  // order, since such a buffer is refused either way.
  Measure Of(flexbuffers::Reference r, uint64_t depth) {
    using flexbuffers::Type;
    switch (r.GetType()) {
      case Type::FBT_STRING:
      case Type::FBT_BLOB:
      case Type::FBT_VECTOR_INT:
      case Type::FBT_VECTOR_UINT:
      case Type::FBT_VECTOR_FLOAT:
      case Type::FBT_VECTOR_BOOL:
      case Type::FBT_VECTOR_KEY:
      case Type::FBT_VECTOR_STRING_DEPRECATED: return Measure{1, 1, false};
      case Type::FBT_VECTOR:
      case Type::FBT_MAP:
        if (depth >= kMaxFlexDepth) return Measure{kMaxFlexDepth + 1, 1, false};
        return OfVector(r.AsVector(), r.GetType() == Type::FBT_MAP, depth);
      default: return Measure{};  // inline, indirect scalars, keys, fixed-size vectors
    }
  }

  Measure OfVector(const flexbuffers::Vector& vector, bool map, uint64_t depth) {
    const uintptr_t key = Key(vector).value() * 2 + (map ? 1 : 0);
    auto [it, fresh] = memo_.try_emplace(key, Measure{0, 0, true});
    if (!fresh) return it->second;       // measured, or being measured: a cycle
    Measure m{1, map ? 2u : 1u, false};  // a map's keys are a vector too, as deep
    for (size_t i = 0; i < vector.size() && !m.cycle; ++i) {
      const Measure child = Of(vector[i], depth + 1);
      m.cycle = child.cycle;
      m.height = std::max(m.height, child.height + 1);
      m.vectors = std::min(m.vectors + child.vectors, uint64_t{1} << 62);
    }
    memo_[key] = m;
    return m;
  }

  const uint64_t max_vectors_;
  std::unordered_map<uintptr_t, Measure> memo_;
};

// One payload's walk. The schema passed BinarySchema::FromBytes, so every
// index it holds is in range; the payload is untrusted. A nested
// FlatBuffer is walked by a walk of its own over its bytes (offsets and
// alignment are relative to its start, as flatc's verifier takes them),
// which shares this one's depth and steps.
class PayloadWalk {
 public:
  PayloadWalk(const reflection::Schema& schema, const uint8_t* buf, size_t size, uint32_t depth, size_t steps)
      : schema_(schema), buf_(buf), verifier_(buf, size, Limits(depth, steps)), depth_(depth), steps_left_(steps) {}

  bool Root(const reflection::Object& root, const Where* where) {
    const uint8_t* table = Target(buf_);
    if (table == nullptr) return Fail(where, "the root offset points outside the payload");
    return Table(root, table, where);
  }

  const std::string& failure() const { return failure_; }
  size_t steps_left() const { return steps_left_; }

 private:
  static flatbuffers::Verifier::Options Limits(uint32_t depth, size_t steps) {
    assert(depth <= kMaxPayloadDepth);
    flatbuffers::Verifier::Options limits;
    limits.max_depth = kMaxPayloadDepth - depth;
    // Tables are steps: the walk's own count is the bound that speaks.
    limits.max_tables = static_cast<flatbuffers::uoffset_t>(std::min<size_t>(steps + 1, UINT32_MAX));
    limits.check_alignment = true;
    limits.check_nested_flatbuffers = false;
    return limits;
  }

  bool Fail(const Where* where, const std::string& what) {
    const std::string path = PathText(where);
    failure_ = path.empty() ? what : path + ": " + what;
    return false;
  }

  // What the offset stored at `slot` points at; null when the slot or the
  // target is out of bounds or misaligned, or the offset is zero (points at
  // itself).
  const uint8_t* Target(const uint8_t* slot) {
    const flatbuffers::uoffset_t offset = verifier_.VerifyOffset(static_cast<size_t>(slot - buf_));
    return offset == 0 ? nullptr : slot + offset;
  }

  // Why Target refused `slot`, for the error.
  std::string TargetFailure(const uint8_t* slot, const char* what) const {
    const size_t at = static_cast<size_t>(slot - buf_);
    if (at % sizeof(flatbuffers::uoffset_t) != 0) return std::string(what) + " is misaligned";
    if (verifier_.Verify(at, sizeof(flatbuffers::uoffset_t)) &&
        flatbuffers::ReadScalar<flatbuffers::uoffset_t>(slot) == 0) {
      return std::string(what) + " is zero (an offset to itself)";
    }
    return std::string(what) + " points outside the payload";
  }

  // Counts `steps` against the walk's budget.
  bool Spend(size_t steps, const Where* where) {
    if (steps <= steps_left_) {
      steps_left_ -= steps;
      return true;
    }
    return Fail(where, "the payload takes more than " + std::to_string(kPayloadStepsPerByte) +
                           " steps per byte to check (offsets that point at the same data many times)");
  }

  bool Table(const reflection::Object& object, const uint8_t* table, const Where* where) {
    if (!Spend(1, where)) return false;
    if (depth_ >= kMaxPayloadDepth) return Fail(where, "tables nested deeper than " + std::to_string(kMaxPayloadDepth));
    if (!verifier_.VerifyTableStart(table)) return Fail(where, "a table out of bounds or misaligned");
    ++depth_;
    for (const reflection::Field* field : *object.fields()) {
      const Where here{where, field->name()->c_str()};
      if (!Field(object, AsTable(table), *field, &here)) return false;
    }
    --depth_;
    return verifier_.EndTable();
  }

  bool Field(const reflection::Object& object, const flatbuffers::Table& table, const reflection::Field& field,
             const Where* where) {
    const reflection::Type& type = *field.type();
    const flatbuffers::voffset_t at = table.GetOptionalFieldOffset(field.offset());
    const BaseType base = type.base_type();
    if (at == 0) {
      if (field.required()) return Fail(where, "a required field is missing");
      return base != BaseType::Union && !IsUnionVector(type) ? true : UnionValueAbsent(table, field, where);
    }
    if (!Spend(1, where)) return false;
    const uint8_t* slot = reinterpret_cast<const uint8_t*>(&table) + at;
    if (ScalarBytes(base) != 0) return Inline(slot, ScalarBytes(base), ScalarBytes(base), where);
    if (base == BaseType::Obj && Object(type).is_struct()) {
      return Inline(slot, Object(type).bytesize(), Object(type).minalign(), where);
    }
    if (base == BaseType::Union) return Union(table, field, slot, where);
    const uint8_t* target = Target(slot);
    if (target == nullptr) return Fail(where, TargetFailure(slot, "an offset"));
    switch (base) {
      case BaseType::String: return String(target, where);
      case BaseType::Vector: return Vector(object, table, field, target, where);
      case BaseType::Obj: return Table(Object(type), target, where);
      default: return Fail(where, "a field of a kind a table cannot hold");
    }
  }

  static bool IsUnionVector(const reflection::Type& type) {
    return type.base_type() == BaseType::Vector && type.element() == BaseType::Union;
  }

  // A union's type field (or vector of types) is the field stored before
  // its value (flatc's layout).
  static flatbuffers::voffset_t TypeFieldAt(const flatbuffers::Table& table, const reflection::Field& field) {
    const auto tag_field = static_cast<flatbuffers::voffset_t>(field.offset() - sizeof(flatbuffers::voffset_t));
    return table.GetOptionalFieldOffset(tag_field);
  }

  // An absent union value: its type must be absent or NONE too, as
  // flatc's verifier requires of vectors of unions and of struct members.
  bool UnionValueAbsent(const flatbuffers::Table& table, const reflection::Field& field, const Where* where) {
    const flatbuffers::voffset_t tag_at = TypeFieldAt(table, field);
    if (tag_at == 0) return true;
    if (IsUnionVector(*field.type())) return Fail(where, "a vector of union types without its vector of values");
    const uint8_t* tag = reinterpret_cast<const uint8_t*>(&table) + tag_at;
    if (!Inline(tag, 1, 1, where)) return false;
    return *tag == 0 || Fail(where, "a union type without its value");
  }

  bool Inline(const uint8_t* at, size_t size, size_t align, const Where* where) {
    if (verifier_.VerifyFieldStruct(at, 0, size, align)) return true;
    return Fail(where, "out of bounds or misaligned");
  }

  bool String(const uint8_t* target, const Where* where) {
    if (verifier_.VerifyString(reinterpret_cast<const flatbuffers::String*>(target))) return true;
    return Fail(where, "a string out of bounds, misaligned or not terminated");
  }

  // A union field. A tag the schema does not know is a newer producer's
  // member: skipped. A value without a tag (absent or NONE) is refused: no
  // flatc-built writer stores one, and readers that take the tag from the
  // field stored before it (FlatBuffers' own JSON printer) would follow an
  // offset this walk never checked.
  bool Union(const flatbuffers::Table& table, const reflection::Field& field, const uint8_t* slot, const Where* where) {
    const flatbuffers::voffset_t tag_at = TypeFieldAt(table, field);
    if (tag_at != 0 && !Inline(reinterpret_cast<const uint8_t*>(&table) + tag_at, 1, 1, where)) return false;
    const uint8_t tag = tag_at == 0 ? 0 : *(reinterpret_cast<const uint8_t*>(&table) + tag_at);
    if (tag == 0) return Fail(where, "a union value without its type (its _type field is absent or NONE)");
    // In bounds whatever the member, as flatc's verifier has it, even one
    // this schema does not know.
    if (Target(slot) == nullptr) return Fail(where, TargetFailure(slot, "a union value's offset"));
    return Member(*schema_.enums()->Get(field.type()->index()), tag, slot, where);
  }

  bool Member(const reflection::Enum& union_enum, uint8_t tag, const uint8_t* slot, const Where* where) {
    if (tag == 0) return true;  // NONE: an empty member of a vector of unions
    const reflection::Type* member = nullptr;
    for (const reflection::EnumVal* value : *union_enum.values()) {
      if (value->value() == tag) member = value->union_type();
    }
    if (member == nullptr) return true;
    const uint8_t* target = Target(slot);
    if (target == nullptr) return Fail(where, TargetFailure(slot, "a union member's offset"));
    switch (member->base_type()) {
      case BaseType::String: return String(target, where);
      case BaseType::Obj: {
        const reflection::Object& object = Object(*member);
        if (object.is_struct()) return Inline(target, object.bytesize(), object.minalign(), where);
        return Table(object, target, where);
      }
      default: return Fail(where, "a union member of a kind a union cannot hold");
    }
  }

  bool Vector(const reflection::Object& object, const flatbuffers::Table& table, const reflection::Field& field,
              const uint8_t* vector, const Where* where) {
    const reflection::Type& type = *field.type();
    const BaseType element = type.element();
    size_t element_size = ScalarBytes(element);
    if (element == BaseType::Obj && Object(type).is_struct()) element_size = Object(type).bytesize();
    if (element == BaseType::String || element == BaseType::Obj || element == BaseType::Union) {
      if (element_size == 0) element_size = sizeof(flatbuffers::uoffset_t);
    }
    if (element_size == 0) return Fail(where, "a vector of a kind of element a vector cannot hold");
    if (!verifier_.VerifyVectorOrString(vector, element_size))
      return Fail(where, "a vector out of bounds or misaligned");
    const uint32_t count = flatbuffers::ReadScalar<flatbuffers::uoffset_t>(vector);
    const uint8_t* first = vector + sizeof(flatbuffers::uoffset_t);
    // flatc 2.0.8's verifier checks only the length's alignment; its
    // builders align the elements too (of an empty vector, not always),
    // and a reader loads them in place.
    size_t element_align = ScalarBytes(element);
    if (element == BaseType::Obj && Object(type).is_struct()) element_align = Object(type).minalign();
    if (count != 0 && element_align > 1 && static_cast<size_t>(first - buf_) % element_align != 0) {
      return Fail(where,
                  "a vector whose elements are misaligned (" + std::to_string(element_align) + "-byte elements)");
    }
    if (element == BaseType::Union) return Unions(table, field, first, count, where);
    if (element == BaseType::UByte) return Bytes(object, field, first, count, where);
    if (ScalarBytes(element) != 0 || (element == BaseType::Obj && Object(type).is_struct())) return true;
    if (!Spend(count, where)) return false;
    for (uint32_t i = 0; i < count; ++i) {
      const Where here{where, nullptr, i};
      const uint8_t* slot = first + i * sizeof(flatbuffers::uoffset_t);
      const uint8_t* target = Target(slot);
      if (target == nullptr) return Fail(&here, TargetFailure(slot, "an offset"));
      if (element == BaseType::String ? !String(target, &here) : !Table(Object(type), target, &here)) return false;
    }
    return true;
  }

  // A vector of bytes: a nested FlatBuffer or a FlexBuffer when the field
  // says so, plain bytes otherwise.
  bool Bytes(const reflection::Object& object, const reflection::Field& field, const uint8_t* data, uint32_t size,
             const Where* where) {
    bool unknown = false;
    if (const reflection::Object* root = NestedFlatBufferRoot(schema_, object, field, &unknown)) {
      return Nested(*root, data, size, where);
    }
    assert(!unknown && "PayloadContract::Make refuses such a schema");
    if (Attribute(field, "flexbuffer") == nullptr) return true;
    if (!Spend(size / 4, where)) return false;
    // FlexBuffers' verifier with its reuse tracker checks each value once
    // (linear in the size), but takes a value that contains itself and
    // does not bound depth along paths it met before; FlexShape does.
    std::vector<uint8_t> seen;
    flexbuffers::Verifier flex(data, size, &seen);
    if (!flex.VerifyBuffer()) {
      return Fail(where,
                  "a FlexBuffer that does not verify (out of bounds or misaligned, or a value read as two types)");
    }
    FlexShape shape(size);
    if (const char* why = shape.Check(flexbuffers::GetRoot(data, size))) return Fail(where, why);
    return true;
  }

  bool Nested(const reflection::Object& root, const uint8_t* data, uint32_t size, const Where* where) {
    if (size < kMinBufferBytes) {
      return Fail(where, "a nested FlatBuffer of " + std::to_string(size) + " bytes (at least " +
                             std::to_string(kMinBufferBytes) + ")");
    }
    if (depth_ >= kMaxPayloadDepth) {
      return Fail(where, "tables nested deeper than " + std::to_string(kMaxPayloadDepth));
    }
    PayloadWalk nested(schema_, data, size, depth_, steps_left_);
    const bool ok = nested.Root(root, where);
    steps_left_ = nested.steps_left();
    return ok || Fail(nullptr, nested.failure());
  }

  // A vector of unions: its tags are a vector of the same length in the
  // field before it.
  bool Unions(const flatbuffers::Table& table, const reflection::Field& field, const uint8_t* first, uint32_t count,
              const Where* where) {
    const flatbuffers::voffset_t tags_at = TypeFieldAt(table, field);
    if (tags_at == 0) return Fail(where, "a vector of unions without its vector of types");
    const uint8_t* tags = Target(reinterpret_cast<const uint8_t*>(&table) + tags_at);
    if (tags == nullptr || !verifier_.VerifyVectorOrString(tags, 1)) {
      return Fail(where, "the vector of union types is out of bounds or misaligned");
    }
    if (flatbuffers::ReadScalar<flatbuffers::uoffset_t>(tags) != count) {
      return Fail(where, "the vector of union types and the vector of unions differ in length");
    }
    if (!Spend(count, where)) return false;
    const reflection::Enum& union_enum = *schema_.enums()->Get(field.type()->index());
    for (uint32_t i = 0; i < count; ++i) {
      const Where here{where, nullptr, i};
      const uint8_t tag = tags[sizeof(flatbuffers::uoffset_t) + i];
      if (!Member(union_enum, tag, first + i * sizeof(flatbuffers::uoffset_t), &here)) return false;
    }
    return true;
  }

  const reflection::Object& Object(const reflection::Type& type) const {
    return *schema_.objects()->Get(static_cast<flatbuffers::uoffset_t>(type.index()));
  }

  const reflection::Schema& schema_;
  const uint8_t* buf_;
  flatbuffers::Verifier verifier_;
  uint32_t depth_;
  size_t steps_left_;
  std::string failure_;
};

}  // namespace

const reflection::Object* NestedFlatBufferRoot(const reflection::Schema& schema, const reflection::Object& parent,
                                               const reflection::Field& field, bool* unknown) {
  const reflection::KeyValue* attribute = Attribute(field, "nested_flatbuffer");
  if (attribute == nullptr) return nullptr;
  const std::string name = attribute->value() == nullptr ? std::string() : attribute->value()->str();
  std::string space = parent.name()->str();
  for (;;) {
    const size_t dot = space.rfind('.');
    space = dot == std::string::npos ? std::string() : space.substr(0, dot);
    const std::string qualified = space.empty() ? name : space + "." + name;
    const reflection::Object* object = schema.objects()->LookupByKey(qualified.c_str());
    if (object != nullptr && !object->is_struct()) return object;
    if (space.empty()) break;
  }
  *unknown = true;
  return nullptr;
}

Result<PayloadContract> PayloadContract::Make(std::string type, uint32_t version, BinarySchema schema) {
  const reflection::Schema& s = schema.schema();
  for (const reflection::Object* object : *s.objects()) {
    for (const reflection::Field* field : *object->fields()) {
      bool unknown = false;
      (void)NestedFlatBufferRoot(s, *object, *field, &unknown);
      if (unknown) {
        return Status::InvalidArgument("the schema of " + type + ": " + object->name()->str() + "." +
                                       field->name()->str() +
                                       " is a nested_flatbuffer of a table the schema does not hold");
      }
    }
  }
  return PayloadContract(std::move(type), version, std::move(schema));
}

Status PayloadContract::Verify(std::string_view data) const {
  assert(data.size() < FLATBUFFERS_MAX_BUFFER_SIZE && "payloads are capped far below FlatBuffers' limit");
  const reflection::Schema& schema = schema_.schema();
  const std::string root = schema_.RootName();
  auto refuse = [&](const std::string& why) {
    return Status::InvalidArgument("payload of " + type_ + " is not a " + root + " (schema version " +
                                   std::to_string(version_) + "): " + why);
  };
  if (data.size() < kMinBufferBytes) {
    return refuse("a buffer of " + std::to_string(data.size()) + " bytes (at least " + std::to_string(kMinBufferBytes) +
                  ")");
  }
  const flatbuffers::String* ident = schema.file_ident();
  if (ident != nullptr && ident->size() == flatbuffers::kFileIdentifierLength &&
      !flatbuffers::BufferHasIdentifier(data.data(), ident->c_str())) {
    return refuse(std::string("its file identifier is not \"") + ident->c_str() + "\"");
  }
  // Scalars are read in place: a payload sliced out of a larger buffer at
  // an odd address is walked from an aligned copy (some ARM loads fault).
  std::unique_ptr<uint64_t[]> aligned;
  const auto* bytes = reinterpret_cast<const uint8_t*>(data.data());
  if (reinterpret_cast<uintptr_t>(bytes) % alignof(uint64_t) != 0) {
    aligned.reset(new uint64_t[data.size() / sizeof(uint64_t) + 1]);
    std::memcpy(aligned.get(), data.data(), data.size());
    bytes = reinterpret_cast<const uint8_t*>(aligned.get());
  }
  PayloadWalk walk(schema, bytes, data.size(), 0, kPayloadStepsPerByte * data.size());
  const Where root_where{nullptr, root.c_str()};
  if (!walk.Root(*schema.root_table(), &root_where)) return refuse(walk.failure());
  return Status::OK();
}

Status LoadLatestContracts(const storage::Db& db, std::vector<PayloadContract>* out,
                           std::map<std::string, std::vector<uint64_t>>* hashes) {
  out->clear();
  if (hashes != nullptr) hashes->clear();
  std::vector<std::string> types;
  if (Status s = ListSchemaTypes(db, &types); !s.ok()) return s;
  for (const std::string& type : types) {
    std::vector<storage::SchemaRecord> accepted;
    if (Status s = LoadAcceptedSchemas(db, type, &accepted); !s.ok()) return s;
    if (accepted.empty()) continue;
    if (hashes != nullptr) {
      for (const storage::SchemaRecord& record : accepted) (*hashes)[type].push_back(record.hash);
    }
    auto latest = BinarySchema::FromBytes(std::move(accepted.back().binary_schema));
    assert(latest.ok() && "LoadAcceptedSchemas read each one back");
    auto contract = PayloadContract::Make(type, static_cast<uint32_t>(accepted.size()), std::move(*latest));
    if (!contract.ok()) return Status::Corruption("the stored schema of " + type + ": " + contract.status().message());
    out->push_back(std::move(*contract));
  }
  return Status::OK();
}

}  // namespace walbus::internal
