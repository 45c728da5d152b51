#include <spillway/table/data_type.hpp>

namespace spillway {

std::string to_string(time_unit unit) {
  switch (unit) {
    case time_unit::SECOND:
      return "s";
    case time_unit::MILLISECOND:
      return "ms";
    case time_unit::MICROSECOND:
      return "us";
    case time_unit::NANOSECOND:
      return "ns";
  }
  return "?";
}

std::string to_string(data_type type) {
  switch (type.id()) {
    case type_id::BOOL8:
      return "bool8";
    case type_id::INT8:
      return "int8";
    case type_id::INT16:
      return "int16";
    case type_id::INT32:
      return "int32";
    case type_id::INT64:
      return "int64";
    case type_id::UINT8:
      return "uint8";
    case type_id::UINT16:
      return "uint16";
    case type_id::UINT32:
      return "uint32";
    case type_id::UINT64:
      return "uint64";
    case type_id::FLOAT32:
      return "float32";
    case type_id::FLOAT64:
      return "float64";
    case type_id::TIMESTAMP:
      return "timestamp[" + to_string(type.unit()) + "]";
    case type_id::STRING:
      return "string";
    case type_id::DATE32:
      return "date32";
    case type_id::DATE64:
      return "date64";
    case type_id::TIME32:
      return "time32[" + to_string(type.unit()) + "]";
    case type_id::TIME64:
      return "time64[" + to_string(type.unit()) + "]";
    case type_id::DURATION:
      return "duration[" + to_string(type.unit()) + "]";
    case type_id::BINARY:
      return "binary";
    case type_id::DECIMAL32:
    case type_id::DECIMAL64:
    case type_id::DECIMAL128:
    case type_id::DECIMAL256:
      return "decimal" + std::to_string(8 * size_of(type)) + "(" +
             std::to_string(type.precision()) + ", " + std::to_string(type.scale()) + ")";
  }
  return "unknown(" + std::to_string(static_cast<int>(type.id())) + ")";
}

}  // namespace spillway
