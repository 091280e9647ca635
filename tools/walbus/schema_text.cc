#include "tools/walbus/schema_text.h"

#include <flatbuffers/idl.h>
#include <flatbuffers/reflection_generated.h>

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace walbus::internal {
namespace {

using reflection::BaseType;
using Attributes = flatbuffers::Vector<flatbuffers::Offset<reflection::KeyValue>>;

const char* ScalarName(BaseType t) {
  switch (t) {
    case BaseType::Bool: return "bool";
    case BaseType::Byte: return "byte";
    case BaseType::UByte: return "ubyte";
    case BaseType::Short: return "short";
    case BaseType::UShort: return "ushort";
    case BaseType::Int: return "int";
    case BaseType::UInt: return "uint";
    case BaseType::Long: return "long";
    case BaseType::ULong: return "ulong";
    case BaseType::Float: return "float";
    case BaseType::Double: return "double";
    case BaseType::String: return "string";
    default: return "";
  }
}

std::string Unqualified(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

std::string NamespaceOf(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? "" : name.substr(0, dot);
}

std::string Quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// Whether flatc knows attribute `name` without a declaration. Binary
// schemas written with --bfbs-builtins hold these too.
bool IsBuiltinAttribute(const std::string& name) {
  static const auto* const builtins = [] {
    const flatbuffers::Parser parser;
    auto* names = new std::set<std::string>();
    for (const auto& [known, builtin] : parser.known_attributes_) {
      if (builtin) names->insert(known);
    }
    return names;
  }();
  return builtins->count(name) != 0;
}

bool HasAttribute(const Attributes* attributes, const char* key) {
  return attributes != nullptr && attributes->LookupByKey(key) != nullptr;
}

std::string RealText(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", value);
  return buf;
}

// Writes one schema's declarations in an order flatc parses: what a
// declaration refers to by value (an enum, a struct inside a struct, a
// union) comes before it.
class SchemaWriter {
 public:
  explicit SchemaWriter(const reflection::Schema& schema) : schema_(schema) {
    for (const auto* object : *schema_.objects()) object_names_.insert(object->name()->str());
    for (const auto* e : *schema_.enums()) enum_names_.insert(e->name()->str());
  }

  // What Write() could not name (see SchemaSourceText).
  const std::vector<std::string>& hidden() const { return hidden_; }

  std::string Write() {
    DeclareAttributes();
    const auto& enums = *schema_.enums();
    for (uint32_t i = 0; i < enums.size(); ++i) {
      if (!enums.Get(i)->is_union()) WriteEnum(*enums.Get(i), static_cast<int32_t>(i));
    }
    std::set<int32_t> written;
    for (uint32_t i = 0; i < schema_.objects()->size(); ++i) WriteStruct(static_cast<int32_t>(i), &written);
    for (uint32_t i = 0; i < enums.size(); ++i) {
      if (enums.Get(i)->is_union()) WriteEnum(*enums.Get(i), static_cast<int32_t>(i));
    }
    for (const auto* object : *schema_.objects()) {
      if (!object->is_struct()) WriteObject(*object);
    }
    WriteFileAttributes();
    return out_;
  }

 private:
  std::string ObjectName(int32_t index) const { return schema_.objects()->Get(index)->name()->str(); }
  std::string EnumName(int32_t index) const { return schema_.enums()->Get(index)->name()->str(); }

  std::string ElementName(BaseType base, int32_t index) const {
    if (base == BaseType::Obj) return ObjectName(index);
    if ((base == BaseType::Union || base == BaseType::UType || base <= BaseType::ULong) && index >= 0) {
      return EnumName(index);
    }
    return ScalarName(base);
  }

  // flatc's own type names: a type of the schema named as one of them
  // (a table `uint` in no namespace) cannot be referred to at all.
  static bool IsBuiltinTypeName(const std::string& name) {
    static const std::set<std::string> kNames = {
        "bool",   "byte", "ubyte", "short", "ushort", "int",   "uint",   "long",  "ulong",  "float",   "double",
        "string", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64"};
    return kNames.count(name) != 0;
  }

  // flatc looks up a type name written in namespace N innermost first
  // (N.name, then each enclosing namespace's, then the name as written),
  // enums before objects; there is no way to write "from the top". So a
  // type written by its full name still resolves to a nearer type whose
  // name ends the same way, when the schema has one.
  bool Hidden(const std::string& qualified, bool is_enum) const {
    if (IsBuiltinTypeName(qualified)) return true;
    for (std::string space = namespace_; !space.empty(); space = NamespaceOf(space)) {
      const std::string nearer = space + "." + qualified;
      if (enum_names_.count(nearer) != 0 || (!is_enum && object_names_.count(nearer) != 0)) return true;
    }
    return !is_enum && enum_names_.count(qualified) != 0;
  }

  // A comment line before a declaration whose type cannot be named from
  // here, so a reader of the source is not misled; empty otherwise.
  std::string HiddenNote(const reflection::Type& type) {
    const bool element = type.base_type() == BaseType::Vector || type.base_type() == BaseType::Array;
    const BaseType base = element ? type.element() : type.base_type();
    if (type.index() < 0 || !(base == BaseType::Obj || base == BaseType::Union || base <= BaseType::ULong)) return "";
    const bool is_enum = base != BaseType::Obj;
    const std::string qualified = is_enum ? EnumName(type.index()) : ObjectName(type.index());
    if (!Hidden(qualified, is_enum)) return "";
    hidden_.push_back(qualified + " from namespace " + namespace_);
    return "  // " + qualified + " is meant: a nearer type of that name hides it in namespace " + namespace_ +
           ", so this line reads back as that type\n";
  }

  std::string TypeName(const reflection::Type& type) const {
    switch (type.base_type()) {
      case BaseType::Vector: return "[" + ElementName(type.element(), type.index()) + "]";
      case BaseType::Array:
        return "[" + ElementName(type.element(), type.index()) + ":" + std::to_string(type.fixed_length()) + "]";
      default: return ElementName(type.base_type(), type.index());
    }
  }

  // Every attribute a declaration carries must be declared first.
  void DeclareAttributes() {
    std::set<std::string> names;
    auto collect = [&](const Attributes* attributes) {
      if (attributes == nullptr) return;
      for (const auto* kv : *attributes) {
        if (!IsBuiltinAttribute(kv->key()->str())) names.insert(kv->key()->str());
      }
    };
    for (const auto* object : *schema_.objects()) {
      collect(object->attributes());
      for (const auto* field : *object->fields()) collect(field->attributes());
    }
    for (const auto* e : *schema_.enums()) collect(e->attributes());
    for (const std::string& name : names) out_ += "attribute " + Quoted(name) + ";\n";
    if (!names.empty()) out_ += "\n";
  }

  // Moves into the namespace of `qualified`; its name inside it.
  std::string Enter(const std::string& qualified) {
    const std::string space = NamespaceOf(qualified);
    if (space != namespace_) {
      out_ += "namespace " + space + ";\n\n";
      namespace_ = space;
    }
    return Unqualified(qualified);
  }

  // " (a, b: "v")" for the built-in flags given and the attributes. A
  // built-in one the flags already say, or a field's id (fields are
  // written in id order), is not repeated; a built-in value that is a
  // number is written as one.
  static std::string AttributeText(std::vector<std::string> items, const Attributes* attributes) {
    const std::vector<std::string> flags = items;
    auto said = [&](const std::string& key) {
      return key == "id" ||
             std::any_of(flags.begin(), flags.end(), [&](const std::string& flag) { return flag.rfind(key, 0) == 0; });
    };
    if (attributes != nullptr) {
      for (const auto* kv : *attributes) {
        const std::string key = kv->key()->str();
        const std::string value = kv->value() == nullptr ? "" : kv->value()->str();
        const bool builtin = IsBuiltinAttribute(key);
        if (builtin && said(key)) continue;
        const bool number = builtin && !value.empty() && value.find_first_not_of("0123456789") == std::string::npos;
        if (value.empty()) {
          items.push_back(key);
        } else {
          items.push_back(key + ": " + (number ? value : Quoted(value)));
        }
      }
    }
    if (items.empty()) return "";
    std::string text = " (";
    for (size_t i = 0; i < items.size(); ++i) text += (i == 0 ? "" : ", ") + items[i];
    return text + ")";
  }

  // Binary schemas keep `bit_flags` only with --bfbs-builtins, but a
  // default that combines
  // flags parses only with it: an enum of single bits that some field
  // defaults to a value it does not list was declared with it.
  bool NeedsBitFlags(const reflection::Enum& e, int32_t index) const {
    std::set<int64_t> values;
    for (const auto* value : *e.values()) {
      const uint64_t v = static_cast<uint64_t>(value->value());
      if (v == 0 || (v & (v - 1)) != 0) return false;
      values.insert(value->value());
    }
    for (const auto* object : *schema_.objects()) {
      for (const auto* field : *object->fields()) {
        const reflection::Type& type = *field->type();
        if (type.base_type() <= BaseType::ULong && type.base_type() >= BaseType::Byte && type.index() == index &&
            field->default_integer() != 0 && values.count(field->default_integer()) == 0) {
          return true;
        }
      }
    }
    return false;
  }

  void WriteEnum(const reflection::Enum& e, int32_t index) {
    const std::string name = Enter(e.name()->str());
    const bool bit_flags = !e.is_union() && (HasAttribute(e.attributes(), "bit_flags") || NeedsBitFlags(e, index));
    if (e.is_union()) {
      out_ += "union " + name + AttributeText({}, e.attributes()) + " {\n";
    } else {
      out_ += "enum " + name + " : " + ScalarName(e.underlying_type()->base_type()) +
              AttributeText(bit_flags ? std::vector<std::string>{"bit_flags"} : std::vector<std::string>{},
                            e.attributes()) +
              " {\n";
    }
    for (const auto* value : *e.values()) {
      if (e.is_union() && value->value() == 0) continue;  // NONE
      std::string line = "  " + value->name()->str();
      if (e.is_union()) {
        out_ += HiddenNote(*value->union_type());
        line += ": " + TypeName(*value->union_type());
      }
      // A flag is declared by its bit's position.
      const int64_t declared = bit_flags ? std::countr_zero(static_cast<uint64_t>(value->value())) : value->value();
      out_ += line + " = " + std::to_string(declared) + ",\n";
    }
    out_ += "}\n\n";
  }

  // A struct after every struct it holds.
  void WriteStruct(int32_t index, std::set<int32_t>* written) {
    const reflection::Object& object = *schema_.objects()->Get(index);
    if (!object.is_struct() || !written->insert(index).second) return;
    for (const auto* field : *object.fields()) {
      const reflection::Type& type = *field->type();
      if (type.base_type() == BaseType::Obj ||
          (type.base_type() == BaseType::Array && type.element() == BaseType::Obj)) {
        WriteStruct(type.index(), written);
      }
    }
    WriteObject(object);
  }

  // The alignment a struct's fields give it; force_align raised it when
  // its minalign is larger.
  size_t NaturalAlignment(const reflection::Object& object) const {
    size_t align = 1;
    for (const auto* field : *object.fields()) {
      const reflection::Type& type = *field->type();
      const BaseType base = type.base_type() == BaseType::Array ? type.element() : type.base_type();
      const size_t size = base == BaseType::Obj ? static_cast<size_t>(schema_.objects()->Get(type.index())->minalign())
                                                : ScalarBytes(base);
      align = std::max(align, size);
    }
    return align;
  }

  static std::string DefaultText(const reflection::Field& field) {
    const BaseType base = field.type()->base_type();
    // Only a scalar has a default; reflection marks every other field
    // that is not required optional too.
    if (base < BaseType::Bool || base > BaseType::Double) return "";
    if (field.optional()) return " = null";
    if (base == BaseType::Float || base == BaseType::Double) {
      const double value = field.default_real();
      return value == 0 && !std::signbit(value) ? "" : " = " + RealText(value);
    }
    if (field.default_integer() == 0) return "";
    if (base == BaseType::Bool) return " = true";
    if (base == BaseType::ULong) return " = " + std::to_string(static_cast<uint64_t>(field.default_integer()));
    return " = " + std::to_string(field.default_integer());
  }

  void WriteObject(const reflection::Object& object) {
    const std::string name = Enter(object.name()->str());
    std::vector<std::string> flags;
    if (object.is_struct() && static_cast<size_t>(object.minalign()) > NaturalAlignment(object)) {
      flags.push_back("force_align: " + std::to_string(object.minalign()));
    }
    out_ += (object.is_struct() ? "struct " : "table ") + name + AttributeText(flags, object.attributes()) + " {\n";
    std::vector<const reflection::Field*> fields(object.fields()->begin(), object.fields()->end());
    std::sort(fields.begin(), fields.end(), [](const auto* a, const auto* b) { return a->id() < b->id(); });
    for (const auto* field : fields) {
      const reflection::Type& type = *field->type();
      // A union's type tag is written with the union, not as a field.
      if (type.base_type() == BaseType::UType ||
          (type.base_type() == BaseType::Vector && type.element() == BaseType::UType)) {
        continue;
      }
      std::vector<std::string> field_flags;
      if (field->deprecated()) field_flags.push_back("deprecated");
      if (field->required()) field_flags.push_back("required");
      if (field->key()) field_flags.push_back("key");
      out_ += HiddenNote(type);
      out_ += "  " + field->name()->str() + ": " + TypeName(type) + DefaultText(*field) +
              AttributeText(field_flags, field->attributes()) + ";\n";
    }
    out_ += "}\n\n";
  }

  void WriteFileAttributes() {
    if (schema_.root_table() != nullptr) out_ += "root_type " + schema_.root_table()->name()->str() + ";\n";
    if (schema_.file_ident() != nullptr && schema_.file_ident()->size() > 0) {
      out_ += "file_identifier " + Quoted(schema_.file_ident()->str()) + ";\n";
    }
    if (schema_.file_ext() != nullptr && schema_.file_ext()->size() > 0) {
      out_ += "file_extension " + Quoted(schema_.file_ext()->str()) + ";\n";
    }
  }

  const reflection::Schema& schema_;
  std::set<std::string> object_names_;
  std::set<std::string> enum_names_;
  std::string out_;
  std::string namespace_;
  std::vector<std::string> hidden_;
};

}  // namespace

std::string SchemaSourceText(const BinarySchema& schema, std::vector<std::string>* hidden) {
  SchemaWriter writer(schema.schema());
  std::string text = writer.Write();
  if (hidden != nullptr) *hidden = writer.hidden();
  return text;
}

}  // namespace walbus::internal
