#include "bus/core/payload_contract.h"

#include <flatbuffers/reflection_generated.h>

#include <cassert>
#include <cstring>
#include <memory>

namespace walbus::internal {
namespace {

using reflection::BaseType;

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

// One payload's walk. The schema passed BinarySchema::FromBytes, so every
// index it holds is in range; the payload is untrusted.
class PayloadWalk {
 public:
  PayloadWalk(const reflection::Schema& schema, const uint8_t* buf, size_t size)
      : schema_(schema), buf_(buf), verifier_(buf, size, Limits()) {}

  bool Root(const reflection::Object& root, const Where* where) {
    const uint8_t* table = Target(buf_);
    if (table == nullptr) return Fail(where, "the root offset points outside the payload");
    return Table(root, table, where);
  }

  const std::string& failure() const { return failure_; }

 private:
  static flatbuffers::Verifier::Options Limits() {
    flatbuffers::Verifier::Options limits;
    limits.max_depth = kMaxPayloadDepth;
    limits.max_tables = kMaxPayloadSteps;
    limits.check_alignment = true;
    limits.check_nested_flatbuffers = false;
    return limits;
  }

  bool Fail(const Where* where, const std::string& what) {
    const std::string path = PathText(where);
    failure_ = path.empty() ? what : path + ": " + what;
    return false;
  }

  // What the offset stored at `slot` points at; null when the slot or
  // the target is out of bounds.
  const uint8_t* Target(const uint8_t* slot) {
    const flatbuffers::uoffset_t offset = verifier_.VerifyOffset(static_cast<size_t>(slot - buf_));
    return offset == 0 ? nullptr : slot + offset;
  }

  // Counts `steps` against the walk's budget.
  bool Spend(size_t steps, const Where* where) {
    if (steps <= steps_left_) {
      steps_left_ -= steps;
      return true;
    }
    return Fail(where, "the payload takes more than " + std::to_string(kMaxPayloadSteps) +
                           " steps to check (offsets that point at the same data many times)");
  }

  bool Table(const reflection::Object& object, const uint8_t* table, const Where* where) {
    if (!Spend(1 + object.fields()->size(), where)) return false;
    if (!verifier_.VerifyTableStart(table)) {
      return Fail(where, "a table out of bounds, or tables nested deeper than " + std::to_string(kMaxPayloadDepth));
    }
    for (const reflection::Field* field : *object.fields()) {
      const Where here{where, field->name()->c_str()};
      if (!Field(AsTable(table), *field, &here)) return false;
    }
    return verifier_.EndTable();
  }

  bool Field(const flatbuffers::Table& table, const reflection::Field& field, const Where* where) {
    const reflection::Type& type = *field.type();
    const flatbuffers::voffset_t at = table.GetOptionalFieldOffset(field.offset());
    if (at == 0) return !field.required() || Fail(where, "a required field is missing");
    const uint8_t* slot = reinterpret_cast<const uint8_t*>(&table) + at;
    const BaseType base = type.base_type();
    if (ScalarBytes(base) != 0) return Inline(slot, ScalarBytes(base), ScalarBytes(base), where);
    if (base == BaseType::Obj && Object(type).is_struct()) {
      return Inline(slot, Object(type).bytesize(), Object(type).minalign(), where);
    }
    if (base == BaseType::Union) return Union(table, field, slot, where);
    const uint8_t* target = Target(slot);
    if (target == nullptr) return Fail(where, "an offset points outside the payload");
    switch (base) {
      case BaseType::String: return String(target, where);
      case BaseType::Vector: return Vector(table, field, target, where);
      case BaseType::Obj: return Table(Object(type), target, where);
      default: return Fail(where, "a field of a kind a table cannot hold");
    }
  }

  bool Inline(const uint8_t* at, size_t size, size_t align, const Where* where) {
    if (verifier_.VerifyFieldStruct(at, 0, size, align)) return true;
    return Fail(where, "out of bounds or misaligned");
  }

  bool String(const uint8_t* target, const Where* where) {
    if (verifier_.VerifyString(reinterpret_cast<const flatbuffers::String*>(target))) return true;
    return Fail(where, "a string out of bounds or not terminated");
  }

  // A union field: its type tag is the field before it (flatc's layout).
  // A tag the schema does not know is a newer producer's member: skipped.
  // A value without a tag (absent or NONE) is refused: no flatc-built
  // writer stores one, and readers that take the tag from the field
  // stored before it (FlatBuffers' own JSON printer) would follow an
  // offset this walk never checked.
  bool Union(const flatbuffers::Table& table, const reflection::Field& field, const uint8_t* slot, const Where* where) {
    const auto tag_field = static_cast<flatbuffers::voffset_t>(field.offset() - sizeof(flatbuffers::voffset_t));
    const flatbuffers::voffset_t tag_at = table.GetOptionalFieldOffset(tag_field);
    if (tag_at != 0 && !Inline(reinterpret_cast<const uint8_t*>(&table) + tag_at, 1, 1, where)) return false;
    const uint8_t tag = table.GetField<uint8_t>(tag_field, 0);
    if (tag == 0) return Fail(where, "a union value without its type (its _type field is absent or NONE)");
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
    if (target == nullptr) return Fail(where, "a union member's offset points outside the payload");
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

  bool Vector(const flatbuffers::Table& table, const reflection::Field& field, const uint8_t* vector,
              const Where* where) {
    const reflection::Type& type = *field.type();
    const BaseType element = type.element();
    size_t element_size = ScalarBytes(element);
    if (element == BaseType::Obj && Object(type).is_struct()) element_size = Object(type).bytesize();
    if (element == BaseType::String || element == BaseType::Obj || element == BaseType::Union) {
      if (element_size == 0) element_size = sizeof(flatbuffers::uoffset_t);
    }
    if (element_size == 0) return Fail(where, "a vector of a kind of element a vector cannot hold");
    if (!verifier_.VerifyVectorOrString(vector, element_size)) return Fail(where, "a vector out of bounds");
    const uint32_t count = flatbuffers::ReadScalar<flatbuffers::uoffset_t>(vector);
    const uint8_t* first = vector + sizeof(flatbuffers::uoffset_t);
    if (element == BaseType::Union) return Unions(table, field, first, count, where);
    if (ScalarBytes(element) != 0 || (element == BaseType::Obj && Object(type).is_struct())) return true;
    if (!Spend(count, where)) return false;
    for (uint32_t i = 0; i < count; ++i) {
      const Where here{where, nullptr, i};
      const uint8_t* target = Target(first + i * sizeof(flatbuffers::uoffset_t));
      if (target == nullptr) return Fail(&here, "an offset points outside the payload");
      if (element == BaseType::String ? !String(target, &here) : !Table(Object(type), target, &here)) return false;
    }
    return true;
  }

  // A vector of unions: its tags are a vector of the same length in the
  // field before it.
  bool Unions(const flatbuffers::Table& table, const reflection::Field& field, const uint8_t* first, uint32_t count,
              const Where* where) {
    const auto tags_field = static_cast<flatbuffers::voffset_t>(field.offset() - sizeof(flatbuffers::voffset_t));
    const flatbuffers::voffset_t tags_at = table.GetOptionalFieldOffset(tags_field);
    if (tags_at == 0) return count == 0 || Fail(where, "a vector of unions without its vector of types");
    const uint8_t* tags = Target(reinterpret_cast<const uint8_t*>(&table) + tags_at);
    if (tags == nullptr || !verifier_.VerifyVectorOrString(tags, 1)) {
      return Fail(where, "the vector of union types is out of bounds");
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
  size_t steps_left_ = kMaxPayloadSteps;
  std::string failure_;
};

}  // namespace

Result<PayloadContract> PayloadContract::Make(std::string type, uint32_t version, BinarySchema schema) {
  const flatbuffers::String* ident = schema.schema().file_ident();
  if (ident == nullptr || ident->size() != flatbuffers::kFileIdentifierLength) {
    return Status::InvalidArgument("the schema of " + type +
                                   " has no file_identifier: without one a payload of another table cannot be told "
                                   "from one of " +
                                   schema.RootName() + "; add file_identifier \"XXXX\"; to the .fbs");
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
  const char* ident = schema.file_ident()->c_str();
  if (data.size() < 2 * sizeof(flatbuffers::uoffset_t) || !flatbuffers::BufferHasIdentifier(data.data(), ident)) {
    return refuse(std::string("its file identifier is not \"") + ident + "\"");
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
  PayloadWalk walk(schema, bytes, data.size());
  const Where root_where{nullptr, root.c_str()};
  if (!walk.Root(*schema.root_table(), &root_where)) return refuse(walk.failure());
  return Status::OK();
}

Status LoadLatestContracts(const storage::Db& db, std::vector<PayloadContract>* out) {
  out->clear();
  std::vector<std::string> types;
  if (Status s = ListSchemaTypes(db, &types); !s.ok()) return s;
  for (const std::string& type : types) {
    std::vector<storage::SchemaRecord> accepted;
    if (Status s = LoadAcceptedSchemas(db, type, &accepted); !s.ok()) return s;
    if (accepted.empty()) continue;
    auto latest = BinarySchema::FromBytes(std::move(accepted.back().binary_schema));
    assert(latest.ok() && "LoadAcceptedSchemas read each one back");
    auto contract = PayloadContract::Make(type, static_cast<uint32_t>(accepted.size()), std::move(*latest));
    if (!contract.ok()) return Status::Corruption("the stored schema of " + type + ": " + contract.status().message());
    out->push_back(std::move(*contract));
  }
  return Status::OK();
}

}  // namespace walbus::internal
