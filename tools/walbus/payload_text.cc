#include "tools/walbus/payload_text.h"

#include <flatbuffers/flexbuffers.h>
#include <flatbuffers/reflection.h>
#include <flatbuffers/reflection_generated.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "bus/core/payload_contract.h"
#include "bus/core/schema_compat.h"

namespace walbus::internal {
namespace {

using reflection::BaseType;

void AppendHex4(uint32_t unit, std::string* out) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  *out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) *out += kDigits[(unit >> shift) & 15];
}

// The next code point of the UTF-8 text at [*at, end); false when it is not
// one (overlong, a surrogate, beyond U+10FFFF, or cut short).
bool NextCodePoint(const unsigned char** at, const unsigned char* end, uint32_t* code) {
  const unsigned char lead = **at;
  const int length = lead < 0x80 ? 1 : (lead >> 5) == 6 ? 2 : (lead >> 4) == 14 ? 3 : (lead >> 3) == 30 ? 4 : 0;
  if (length == 0 || end - *at < length) return false;
  static constexpr uint32_t kLeadMask[] = {0, 0x7f, 0x1f, 0x0f, 0x07};
  static constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  uint32_t c = lead & kLeadMask[length];
  for (int i = 1; i < length; ++i) {
    if (((*at)[i] & 0xc0) != 0x80) return false;
    c = (c << 6) | ((*at)[i] & 0x3f);
  }
  if (c < kSmallest[length] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return false;
  *at += length;
  *code = c;
  return true;
}

// `text` as a JSON string, ASCII only; false when it is not UTF-8.
bool AppendString(std::string_view text, std::string* out) {
  *out += '"';
  const auto* at = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = at + text.size();
  while (at < end) {
    uint32_t c = 0;
    if (!NextCodePoint(&at, end, &c)) return false;
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default:
        if (c >= 0x20 && c < 0x7f) {
          *out += static_cast<char>(c);
        } else if (c < 0x10000) {
          AppendHex4(c, out);
        } else {
          AppendHex4(0xd800 + ((c - 0x10000) >> 10), out);
          AppendHex4(0xdc00 + ((c - 0x10000) & 0x3ff), out);
        }
    }
  }
  *out += '"';
  return true;
}

// The shortest text that reads back to `value`; JSON has no number for
// NaN and the infinities, so they are strings.
template <typename Real>
void AppendReal(Real value, std::string* out) {
  if (std::isnan(value)) {
    *out += "\"NaN\"";
  } else if (std::isinf(value)) {
    *out += value < 0 ? "\"-Infinity\"" : "\"Infinity\"";
  } else {
    char text[64];
    const auto written = std::to_chars(text, text + sizeof(text), value);
    out->append(text, written.ptr);
  }
}

class TextWriter {
 public:
  TextWriter(const reflection::Schema& schema, size_t max_bytes) : schema_(schema), max_bytes_(max_bytes) {}

  bool Root(const uint8_t* buffer) {
    return Table(*schema_.root_table(), *flatbuffers::GetRoot<flatbuffers::Table>(buffer));
  }
  std::string& text() { return out_; }

 private:
  // Fields in id order, as flatc declares and prints them.
  static std::vector<const reflection::Field*> ById(const reflection::Object& object) {
    std::vector<const reflection::Field*> fields(object.fields()->begin(), object.fields()->end());
    std::sort(fields.begin(), fields.end(), [](const auto* a, const auto* b) { return a->id() < b->id(); });
    return fields;
  }

  bool Fits() const { return out_.size() <= max_bytes_; }

  void Name(const reflection::Field& field, bool first) {
    if (!first) out_ += ',';
    out_ += '"';
    out_ += field.name()->str();
    out_ += "\": ";
  }

  bool Table(const reflection::Object& object, const flatbuffers::Table& table) {
    out_ += '{';
    bool first = true;
    for (const reflection::Field* field : ById(object)) {
      if (!table.CheckField(field->offset())) continue;
      Name(*field, first);
      first = false;
      if (!TableField(object, table, *field)) return false;
    }
    out_ += '}';
    return Fits();
  }

  bool Struct(const reflection::Object& object, const uint8_t* at) {
    out_ += '{';
    bool first = true;
    for (const reflection::Field* field : ById(object)) {
      Name(*field, first);
      first = false;
      const reflection::Type& type = *field->type();
      const uint8_t* value = at + field->offset();
      if (type.base_type() == BaseType::Array) {
        Array(type, value);
      } else if (type.base_type() == BaseType::Obj) {
        Struct(ObjectOf(type), value);
      } else {
        Scalar(type.base_type(), type.index(), value);
      }
    }
    out_ += '}';
    return Fits();
  }

  void Array(const reflection::Type& type, const uint8_t* first) {
    out_ += '[';
    const bool structs = type.element() == BaseType::Obj;
    const size_t size = structs ? ObjectOf(type).bytesize() : ScalarBytes(type.element());
    for (uint32_t i = 0; i < type.fixed_length(); ++i) {
      if (i != 0) out_ += ',';
      if (structs) {
        Struct(ObjectOf(type), first + i * size);
      } else {
        Scalar(type.element(), type.index(), first + i * size);
      }
    }
    out_ += ']';
  }

  bool TableField(const reflection::Object& object, const flatbuffers::Table& table, const reflection::Field& field) {
    const reflection::Type& type = *field.type();
    const uint8_t* slot = table.GetAddressOf(field.offset());
    switch (type.base_type()) {
      case BaseType::Obj:
        if (ObjectOf(type).is_struct()) return Struct(ObjectOf(type), slot);
        return Table(ObjectOf(type), *reinterpret_cast<const flatbuffers::Table*>(Target(slot)));
      case BaseType::String: return String(slot);
      case BaseType::Union: return UnionValue(type, TagOf(table, field), Target(slot));
      case BaseType::Vector: return Vector(object, table, field, Target(slot));
      default: Scalar(type.base_type(), type.index(), slot); return true;
    }
  }

  static const uint8_t* Target(const uint8_t* slot) {
    return slot + flatbuffers::ReadScalar<flatbuffers::uoffset_t>(slot);
  }

  bool String(const uint8_t* slot) {
    const auto* s = reinterpret_cast<const flatbuffers::String*>(Target(slot));
    return AppendString(s->string_view(), &out_);
  }

  // A union's type is the field stored before its value.
  static const uint8_t* TypeSlot(const flatbuffers::Table& table, const reflection::Field& field) {
    return table.GetAddressOf(static_cast<flatbuffers::voffset_t>(field.offset() - sizeof(flatbuffers::voffset_t)));
  }
  static uint8_t TagOf(const flatbuffers::Table& table, const reflection::Field& field) {
    const uint8_t* slot = TypeSlot(table, field);
    return slot == nullptr ? 0 : *slot;
  }

  bool UnionValue(const reflection::Type& type, uint8_t tag, const uint8_t* value) {
    const reflection::EnumVal* member =
        schema_.enums()->Get(static_cast<uint32_t>(type.index()))->values()->LookupByKey(tag);
    if (member == nullptr || tag == 0) return false;  // unknown to this schema: no text of it
    const reflection::Type& member_type = *member->union_type();
    if (member_type.base_type() == BaseType::String) {
      return AppendString(reinterpret_cast<const flatbuffers::String*>(value)->string_view(), &out_);
    }
    const reflection::Object& object = ObjectOf(member_type);
    if (object.is_struct()) return Struct(object, value);
    return Table(object, *reinterpret_cast<const flatbuffers::Table*>(value));
  }

  bool Vector(const reflection::Object& object, const flatbuffers::Table& table, const reflection::Field& field,
              const uint8_t* vector) {
    const reflection::Type& type = *field.type();
    const BaseType element = type.element();
    const uint32_t count = flatbuffers::ReadScalar<flatbuffers::uoffset_t>(vector);
    const uint8_t* first = vector + sizeof(flatbuffers::uoffset_t);
    if (element == BaseType::UByte && field.attributes() != nullptr) {
      bool unknown = false;
      if (const reflection::Object* root = NestedFlatBufferRoot(schema_, object, field, &unknown)) {
        return Nested(*root, first, count);
      }
      if (field.attributes()->LookupByKey("flexbuffer") != nullptr) {
        return Flex(flexbuffers::GetRoot(first, count), 0);
      }
    }
    const uint8_t* tags = element == BaseType::Union ? Target(TypeSlot(table, field)) + sizeof(uint32_t) : nullptr;
    const bool structs = element == BaseType::Obj && ObjectOf(type).is_struct();
    const size_t stride = structs                     ? ObjectOf(type).bytesize()
                          : ScalarBytes(element) != 0 ? ScalarBytes(element)
                                                      : sizeof(flatbuffers::uoffset_t);
    out_ += '[';
    for (uint32_t i = 0; i < count; ++i) {
      if (i != 0) out_ += ',';
      const uint8_t* at = first + i * stride;
      bool ok = true;
      if (structs) {
        ok = Struct(ObjectOf(type), at);
      } else if (element == BaseType::Obj) {
        ok = Table(ObjectOf(type), *reinterpret_cast<const flatbuffers::Table*>(Target(at)));
      } else if (element == BaseType::String) {
        ok = String(at);
      } else if (element == BaseType::Union) {
        ok = UnionValue(type, tags[i], Target(at));
      } else {
        Scalar(element, type.index(), at);
      }
      if (!ok || !Fits()) return false;
    }
    out_ += ']';
    return true;
  }

  // A nested FlatBuffer, read from an aligned copy: its alignment is
  // relative to its own start.
  bool Nested(const reflection::Object& root, const uint8_t* data, uint32_t size) {
    std::vector<uint64_t> aligned(size / sizeof(uint64_t) + 1);
    std::memcpy(aligned.data(), data, size);
    return Table(root, *flatbuffers::GetRoot<flatbuffers::Table>(aligned.data()));
  }

  // A FlexBuffer value as JSON; the payload check bounded its depth and
  // refused cycles.
  bool Flex(flexbuffers::Reference value, int depth) {
    if (depth > 64 || !Fits()) return false;
    if (value.IsNull()) {
      out_ += "null";
    } else if (value.IsBool()) {
      out_ += value.AsBool() ? "true" : "false";
    } else if (value.IsInt()) {
      out_ += std::to_string(value.AsInt64());
    } else if (value.IsUInt()) {
      out_ += std::to_string(value.AsUInt64());
    } else if (value.IsFloat()) {
      AppendReal(value.AsDouble(), &out_);
    } else if (value.IsKey()) {
      return AppendString(value.AsKey(), &out_);
    } else if (value.IsString()) {
      const flexbuffers::String text = value.AsString();
      return AppendString(std::string_view(text.c_str(), text.size()), &out_);
    } else if (value.IsMap()) {
      const flexbuffers::Map map = value.AsMap();
      const flexbuffers::TypedVector keys = map.Keys();
      const flexbuffers::Vector values = map.Values();
      out_ += '{';
      for (size_t i = 0; i < keys.size(); ++i) {
        if (i != 0) out_ += ',';
        if (!AppendString(keys[i].AsKey(), &out_)) return false;
        out_ += ": ";
        if (!Flex(values[i], depth + 1)) return false;
      }
      out_ += '}';
    } else if (value.IsBlob()) {
      const flexbuffers::Blob blob = value.AsBlob();
      out_ += '[';
      for (size_t i = 0; i < blob.size(); ++i) out_ += (i == 0 ? "" : ",") + std::to_string(blob.data()[i]);
      out_ += ']';
    } else if (value.IsUntypedVector()) {
      return FlexVector(value.AsVector(), depth);
    } else if (value.IsTypedVector()) {
      return FlexVector(value.AsTypedVector(), depth);
    } else if (value.IsFixedTypedVector()) {
      return FlexVector(value.AsFixedTypedVector(), depth);
    } else {
      return false;
    }
    return Fits();
  }

  template <typename Elements>
  bool FlexVector(const Elements& elements, int depth) {
    out_ += '[';
    for (size_t i = 0; i < elements.size(); ++i) {
      if (i != 0) out_ += ',';
      if (!Flex(elements[i], depth + 1)) return false;
    }
    out_ += ']';
    return Fits();
  }

  void Scalar(BaseType base, int32_t enum_index, const uint8_t* at) {
    switch (base) {
      case BaseType::Bool: out_ += *at != 0 ? "true" : "false"; return;
      case BaseType::Float: AppendReal(flatbuffers::ReadScalar<float>(at), &out_); return;
      case BaseType::Double: AppendReal(flatbuffers::ReadScalar<double>(at), &out_); return;
      default: break;
    }
    const int64_t value = flatbuffers::GetAnyValueI(base, at);
    if (enum_index >= 0 && EnumName(*schema_.enums()->Get(static_cast<uint32_t>(enum_index)), value)) return;
    out_ += base == BaseType::ULong ? std::to_string(static_cast<uint64_t>(value)) : std::to_string(value);
  }

  // Writes `value` as its enum's name, or as the names of its flags; false
  // when it is neither (then it is written as a number).
  bool EnumName(const reflection::Enum& e, int64_t value) {
    if (const reflection::EnumVal* named = e.values()->LookupByKey(value)) {
      out_ += '"' + named->name()->str() + '"';
      return true;
    }
    if (value == 0 || e.attributes() == nullptr || e.attributes()->LookupByKey("bit_flags") == nullptr) return false;
    const auto bits = static_cast<uint64_t>(value);
    uint64_t covered = 0;
    std::string names;
    for (const reflection::EnumVal* flag : *e.values()) {
      const auto f = static_cast<uint64_t>(flag->value());
      if ((f & bits) == 0) continue;
      covered |= f;
      names += (names.empty() ? "" : " ") + flag->name()->str();
    }
    if (covered != bits) return false;
    out_ += '"' + names + '"';
    return true;
  }

  const reflection::Object& ObjectOf(const reflection::Type& type) const {
    return *schema_.objects()->Get(static_cast<uint32_t>(type.index()));
  }

  const reflection::Schema& schema_;
  const size_t max_bytes_;
  std::string out_;
};

}  // namespace

std::string PayloadText(const reflection::Schema& schema, std::string_view payload) {
  TextWriter writer(schema, kMaxPayloadTextPerByte * payload.size() + 4096);
  if (!writer.Root(reinterpret_cast<const uint8_t*>(payload.data()))) return std::string();
  return std::move(writer.text());
}

}  // namespace walbus::internal
