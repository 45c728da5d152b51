#include <spillway/table/data_type.hpp>
#include <spillway/table/decimal.hpp>

#include <algorithm>
#include <array>
#include <cstring>

namespace spillway {
namespace {

__extension__ using uint128 = unsigned __int128;

/// A 256-bit integer as four 64-bit words, least significant first.
using words256 = std::array<std::uint64_t, 4>;

/// The value at `value` (of decimal `type`) sign-extended to 256 bits.
words256 widen(data_type type, void const* value) noexcept {
  words256 words{};
  std::int64_t low = 0;
  switch (type.id()) {
    case type_id::DECIMAL32: {
      std::int32_t narrow = 0;
      std::memcpy(&narrow, value, sizeof(narrow));
      low = narrow;
      break;
    }
    case type_id::DECIMAL64:
      std::memcpy(&low, value, sizeof(low));
      break;
    case type_id::DECIMAL128: {
      decimal128_storage wide{};
      std::memcpy(&wide, value, sizeof(wide));
      words = {wide.lo,
               static_cast<std::uint64_t>(wide.hi),
               wide.hi < 0 ? ~std::uint64_t{0} : 0,
               wide.hi < 0 ? ~std::uint64_t{0} : 0};
      return words;
    }
    default:
      std::memcpy(words.data(), value, sizeof(words));
      return words;
  }
  std::uint64_t const fill = low < 0 ? ~std::uint64_t{0} : 0;
  return {static_cast<std::uint64_t>(low), fill, fill, fill};
}

bool negative(words256 const& words) noexcept { return (words[3] >> 63U) != 0; }

/// Two's-complement negation in place.
void negate(words256& words) noexcept {
  std::uint64_t carry = 1;
  for (auto& word : words) {
    word  = ~word + carry;
    carry = (carry != 0 && word == 0) ? 1 : 0;
  }
}

bool is_zero(words256 const& words) noexcept {
  return std::all_of(words.begin(), words.end(), [](std::uint64_t word) { return word == 0; });
}

/// Divides the unsigned `words` by `divisor` in place; returns the remainder.
std::uint64_t divide(words256& words, std::uint64_t divisor) noexcept {
  uint128 remainder = 0;
  for (std::size_t word = words.size(); word-- > 0;) {
    uint128 const current = (remainder << 64U) | words[word];
    words[word]           = static_cast<std::uint64_t>(current / divisor);
    remainder             = current % divisor;
  }
  return static_cast<std::uint64_t>(remainder);
}

/// `words = words * 10 + digit` over unsigned 256 bits (the caller bounds the digits).
void times_ten_plus(words256& words, unsigned digit) noexcept {
  uint128 carry = digit;
  for (auto& word : words) {
    uint128 const current = static_cast<uint128>(word) * 10U + carry;
    word                  = static_cast<std::uint64_t>(current);
    carry                 = current >> 64U;
  }
}

/// The decimal digits of the unsigned `words` (no leading zeros; "0" for zero).
std::string digits_of(words256 words) {
  constexpr std::uint64_t CHUNK = 10'000'000'000'000'000'000ULL;  // 10^19
  std::string reversed;
  while (!is_zero(words)) {
    std::uint64_t chunk = divide(words, CHUNK);
    bool const last     = is_zero(words);
    for (int digit = 0; digit < 19 && (!last || chunk != 0); ++digit) {
      reversed.push_back(static_cast<char>('0' + chunk % 10));
      chunk /= 10;
    }
  }
  if (reversed.empty()) {
    reversed = "0";
  }
  return {reversed.rbegin(), reversed.rend()};
}

}  // namespace

void append_decimal(std::string& out, data_type type, void const* value) {
  words256 words      = widen(type, value);
  bool const is_minus = negative(words);
  if (is_minus) {
    negate(words);  // the most negative 256-bit value negates to itself: as unsigned, 2^255
  }
  std::string digits = digits_of(words);
  int const scale    = type.scale();
  if (is_minus) {
    out.push_back('-');
  }
  if (scale <= 0) {
    out += digits;
    if (digits != "0") {
      out.append(static_cast<std::size_t>(-static_cast<std::int64_t>(scale)), '0');
    }
    return;
  }
  auto const fraction = static_cast<std::size_t>(scale);
  if (digits.size() <= fraction) {
    digits.insert(0, fraction + 1 - digits.size(), '0');
  }
  out.append(digits, 0, digits.size() - fraction);
  out.push_back('.');
  out.append(digits, digits.size() - fraction);
}

std::string decimal_to_string(data_type type, void const* value) {
  std::string text;
  append_decimal(text, type, value);
  return text;
}

bool parse_decimal(std::string_view text, data_type type, void* value) noexcept {
  if (!is_valid_decimal(type)) {
    return false;
  }
  bool minus = false;
  if (!text.empty() && (text.front() == '-' || text.front() == '+')) {
    minus = text.front() == '-';
    text.remove_prefix(1);
  }
  std::size_t const point = text.find('.');
  std::string_view whole  = text.substr(0, point);
  std::string_view fraction =
    point == std::string_view::npos ? std::string_view{} : text.substr(point + 1);
  auto const all_digits = [](std::string_view part) {
    return std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if ((whole.empty() && fraction.empty()) || !all_digits(whole) || !all_digits(fraction)) {
    return false;
  }
  std::int64_t const scale = type.scale();
  // The unscaled digits: the whole part, then `scale` fraction digits (zero-padded); extra
  // fraction digits must be zeros, and a negative scale drops as many trailing zeros.
  std::string digits{whole};
  if (scale >= 0) {
    auto const kept = static_cast<std::size_t>(scale);
    if (fraction.size() > kept) {
      std::string_view const extra = fraction.substr(kept);
      if (extra.find_first_not_of('0') != std::string_view::npos) {
        return false;
      }
      fraction = fraction.substr(0, kept);
    }
    digits += fraction;
    digits.append(kept - fraction.size(), '0');
  } else {
    if (fraction.find_first_not_of('0') != std::string_view::npos) {
      return false;
    }
    auto const dropped                  = static_cast<std::size_t>(-scale);
    std::size_t const first_significant = digits.find_first_not_of('0');
    if (first_significant != std::string::npos) {
      if (digits.size() - first_significant < dropped ||
          digits.find_first_not_of('0', digits.size() - dropped) != std::string::npos) {
        return false;
      }
      digits.resize(digits.size() - dropped);
    } else {
      digits = "0";
    }
  }
  std::size_t const first = std::min(digits.find_first_not_of('0'), digits.size());
  if (digits.size() - first > static_cast<std::size_t>(type.precision())) {
    return false;
  }
  words256 words{};
  for (std::size_t at = first; at < digits.size(); ++at) {
    times_ten_plus(words, static_cast<unsigned>(digits[at] - '0'));
  }
  if (minus) {
    negate(words);
  }
  switch (type.id()) {
    case type_id::DECIMAL32: {
      auto const narrow = static_cast<std::int32_t>(static_cast<std::int64_t>(words[0]));
      std::memcpy(value, &narrow, sizeof(narrow));
      break;
    }
    case type_id::DECIMAL64:
      std::memcpy(value, words.data(), sizeof(std::int64_t));
      break;
    case type_id::DECIMAL128: {
      decimal128_storage const wide{words[0], static_cast<std::int64_t>(words[1])};
      std::memcpy(value, &wide, sizeof(wide));
      break;
    }
    default:
      std::memcpy(value, words.data(), sizeof(words));
      break;
  }
  return true;
}

}  // namespace spillway
