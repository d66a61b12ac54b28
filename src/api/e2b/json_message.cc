#include "api/e2b/json_message.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/timestamp.pb.h>
#include <google/protobuf/util/time_util.h>

#include <charconv>
#include <limits>

#include "common/base64.h"

namespace hutch::api::e2b {

namespace pb = google::protobuf;

namespace {

Error Bad(const pb::FieldDescriptor* f, const std::string& want) {
  return MakeError(Code::kInternal, "field " + f->full_name() + ": " + want);
}

// An integer given as a JSON number or as a decimal string (int64's form).
template <class T>
Result<T> Integer(const Json& v, const pb::FieldDescriptor* f) {
  if (v.is_number_integer()) {
    if constexpr (std::is_signed_v<T>) {
      if (v.is_number_unsigned()) {
        const auto u = v.get<uint64_t>();
        if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return Bad(f, "out of range");
        return static_cast<T>(u);
      }
      const auto i = v.get<int64_t>();
      if (i < std::numeric_limits<T>::min() || i > std::numeric_limits<T>::max())
        return Bad(f, "out of range");
      return static_cast<T>(i);
    } else {
      // (nlohmann keeps a value built from a signed integer signed.)
      if (!v.is_number_unsigned() && v.get<int64_t>() < 0) return Bad(f, "must not be negative");
      const auto u = v.get<uint64_t>();
      if (u > std::numeric_limits<T>::max()) return Bad(f, "out of range");
      return static_cast<T>(u);
    }
  }
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    T out{};
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec != std::errc() || end != s.data() + s.size()) return Bad(f, "not an integer");
    return out;
  }
  return Bad(f, "not an integer");
}

Status SetValue(const Json& v, pb::Message* m, const pb::FieldDescriptor* f, bool add);

// A message field's value: Timestamp's string form, or a JSON object.
Status SetMessage(const Json& v, pb::Message* sub, const pb::FieldDescriptor* f) {
  if (sub->GetDescriptor()->full_name() == "google.protobuf.Timestamp") {
    auto* ts = dynamic_cast<pb::Timestamp*>(sub);
    if (!v.is_string() || ts == nullptr ||
        !pb::util::TimeUtil::FromString(v.get<std::string>(), ts))
      return Bad(f, "not an RFC 3339 timestamp");
    return Status{};
  }
  if (!v.is_object()) return Bad(f, "not an object");
  return JsonToMessage(v, sub);
}

// One value of field `f`: set, or added to the repeated field (`add`).
Status SetValue(const Json& v, pb::Message* m, const pb::FieldDescriptor* f, bool add) {
  const pb::Reflection* r = m->GetReflection();
  using FD = pb::FieldDescriptor;
  switch (f->cpp_type()) {
    case FD::CPPTYPE_STRING: {
      if (!v.is_string()) return Bad(f, "not a string");
      std::string s = v.get<std::string>();
      if (f->type() == FD::TYPE_BYTES) {
        std::string raw;
        if (!Base64Decode(s, &raw)) return Bad(f, "not base64");
        s = std::move(raw);
      }
      add ? r->AddString(m, f, std::move(s)) : r->SetString(m, f, std::move(s));
      return Status{};
    }
    case FD::CPPTYPE_BOOL:
      if (!v.is_boolean()) return Bad(f, "not a bool");
      add ? r->AddBool(m, f, v.get<bool>()) : r->SetBool(m, f, v.get<bool>());
      return Status{};
    case FD::CPPTYPE_INT32: {
      auto n = Integer<int32_t>(v, f);
      if (!n.ok()) return n.error();
      add ? r->AddInt32(m, f, *n) : r->SetInt32(m, f, *n);
      return Status{};
    }
    case FD::CPPTYPE_UINT32: {
      auto n = Integer<uint32_t>(v, f);
      if (!n.ok()) return n.error();
      add ? r->AddUInt32(m, f, *n) : r->SetUInt32(m, f, *n);
      return Status{};
    }
    case FD::CPPTYPE_INT64: {
      auto n = Integer<int64_t>(v, f);
      if (!n.ok()) return n.error();
      add ? r->AddInt64(m, f, *n) : r->SetInt64(m, f, *n);
      return Status{};
    }
    case FD::CPPTYPE_UINT64: {
      auto n = Integer<uint64_t>(v, f);
      if (!n.ok()) return n.error();
      add ? r->AddUInt64(m, f, *n) : r->SetUInt64(m, f, *n);
      return Status{};
    }
    case FD::CPPTYPE_DOUBLE:
    case FD::CPPTYPE_FLOAT: {
      if (!v.is_number()) return Bad(f, "not a number");
      const double d = v.get<double>();
      if (f->cpp_type() == FD::CPPTYPE_DOUBLE) add ? r->AddDouble(m, f, d) : r->SetDouble(m, f, d);
      else
        add ? r->AddFloat(m, f, static_cast<float>(d)) : r->SetFloat(m, f, static_cast<float>(d));
      return Status{};
    }
    case FD::CPPTYPE_ENUM: {
      int number = 0;
      if (v.is_string()) {
        const pb::EnumValueDescriptor* e = f->enum_type()->FindValueByName(v.get<std::string>());
        if (e == nullptr) return Bad(f, "no enum value " + v.get<std::string>());
        number = e->number();
      } else {
        auto n = Integer<int32_t>(v, f);
        if (!n.ok()) return n.error();
        number = *n;
      }
      add ? r->AddEnumValue(m, f, number) : r->SetEnumValue(m, f, number);
      return Status{};
    }
    case FD::CPPTYPE_MESSAGE:
      return SetMessage(v, add ? r->AddMessage(m, f) : r->MutableMessage(m, f), f);
  }
  return Bad(f, "unsupported type");
}

// map<K, V>: a JSON object, each member one entry message {key = 1, value = 2}.
Status SetMap(const Json& v, pb::Message* m, const pb::FieldDescriptor* f) {
  if (!v.is_object()) return Bad(f, "not an object");
  const pb::Descriptor* entry = f->message_type();
  const pb::FieldDescriptor* key = entry->map_key();
  const pb::FieldDescriptor* value = entry->map_value();
  for (auto it = v.begin(); it != v.end(); ++it) {
    pb::Message* e = m->GetReflection()->AddMessage(m, f);
    if (auto st = SetValue(Json(it.key()), e, key, false); !st.ok()) return st;
    if (auto st = SetValue(it.value(), e, value, false); !st.ok()) return st;
  }
  return Status{};
}

const pb::FieldDescriptor* FieldNamed(const pb::Descriptor* d, const std::string& name) {
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    if (f->json_name() == name || f->name() == name) return f;
  }
  return nullptr;
}

}  // namespace

Status JsonToMessage(const Json& value, pb::Message* out) {
  const pb::Descriptor* d = out->GetDescriptor();
  if (!value.is_object())
    return MakeError(Code::kInternal, "message " + d->full_name() + " is not a JSON object");
  for (auto it = value.begin(); it != value.end(); ++it) {
    const pb::FieldDescriptor* f = FieldNamed(d, it.key());
    if (f == nullptr)
      return MakeError(Code::kInternal, "message " + d->full_name() + " has no field " + it.key());
    const Json& v = it.value();
    if (v.is_null()) continue;
    Status st;
    if (f->is_map()) {
      st = SetMap(v, out, f);
    } else if (f->is_repeated()) {
      if (!v.is_array()) return Bad(f, "not an array");
      for (const Json& item : v)
        if (st = SetValue(item, out, f, true); !st.ok()) break;
    } else {
      st = SetValue(v, out, f, false);
    }
    if (!st.ok()) return st;
  }
  return Status{};
}

}  // namespace hutch::api::e2b
