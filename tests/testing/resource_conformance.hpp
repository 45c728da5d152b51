/**
 * @file resource_conformance.hpp
 * @brief Behaviour every `memory_resource` must have, written once and run for each resource
 * (STYLE habit 13, after rmm's `mr_ref_test.hpp`).
 *
 * Instantiate with fixture structs that own the resource under test and whatever it adapts:
 * @code
 * struct pool_fixture {
 *   static constexpr char const* name = "pool";                 // the test name suffix
 *   static constexpr spillway::memory_kind kind = spillway::memory_kind::HOST;  // expected kind()
 *   spillway::host_memory_resource upstream;
 *   spillway::pool_memory_resource resource{upstream};          // what the suite tests
 * };
 * using fixtures = ::testing::Types<pool_fixture, ...>;
 * INSTANTIATE_TYPED_TEST_SUITE_P(Memory, ResourceConformance, fixtures,
 *                                spillway::test::fixture_names);
 * @endcode
 */
#pragma once

#include <spillway/core/units.hpp>
#include <spillway/memory/memory_resource.hpp>
#include <spillway/memory/resource_ref.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace spillway::test {

/** @brief Names each typed instantiation after its fixture's `name`. */
struct fixture_names {
  template <typename Fixture>
  static std::string GetName(int)  // NOLINT(readability-identifier-naming): gtest's hook
  {
    return Fixture::name;
  }
};

/** @brief Writes `value` over all `bytes` bytes at `pointer`. */
inline void fill_block(void* pointer, std::size_t bytes, unsigned char value) {
  if (bytes > 0) {
    std::memset(pointer, value, bytes);
  }
}

/** @return true when every one of the `bytes` bytes at `pointer` equals `value` */
inline bool block_holds(void const* pointer, std::size_t bytes, unsigned char value) {
  if (bytes == 0) {
    return true;
  }
  auto const* first = static_cast<unsigned char const*>(pointer);
  // All bytes equal the first exactly when the block equals itself shifted by one.
  return first[0] == value && std::memcmp(first, first + 1, bytes - 1) == 0;
}

/** @return true when `pointer` is a multiple of `alignment` */
inline bool is_aligned(void const* pointer, std::size_t alignment) {
  return reinterpret_cast<std::uintptr_t>(pointer) % alignment == 0;
}

/** @brief The typed fixture: holds one `Fixture` per test. */
template <typename Fixture>
class ResourceConformance : public ::testing::Test {
 protected:
  memory_resource& resource() { return fixture_.resource; }

  Fixture fixture_;
};

TYPED_TEST_SUITE_P(ResourceConformance);

TYPED_TEST_P(ResourceConformance, AllocatesEverySizeAndAlignment) {
  memory_resource& resource = this->resource();
  std::vector<std::size_t> const sizes{
    1, 7, 8, 63, 64, 65, 1000, 4096, 64_KiB, 64_KiB + 1, 1_MiB + 3};
  unsigned char value = 1;
  for (std::size_t alignment = 8; alignment <= 4096; alignment *= 2) {
    for (std::size_t const bytes : sizes) {
      SCOPED_TRACE("bytes " + std::to_string(bytes) + ", alignment " + std::to_string(alignment));
      void* pointer = resource.allocate(bytes, alignment);
      ASSERT_NE(pointer, nullptr);
      EXPECT_TRUE(is_aligned(pointer, alignment));
      fill_block(pointer, bytes, value);
      EXPECT_TRUE(block_holds(pointer, bytes, value));
      resource.deallocate(pointer, bytes, alignment);
      value = static_cast<unsigned char>(value % 250 + 1);
    }
  }
}

TYPED_TEST_P(ResourceConformance, DefaultAlignmentIsHonoured) {
  resource_ref resource{this->resource()};
  for (std::size_t const bytes : {std::size_t{1}, std::size_t{24}, std::size_t{100}, 3_KiB}) {
    void* pointer = resource.allocate(bytes);
    ASSERT_NE(pointer, nullptr);
    EXPECT_TRUE(is_aligned(pointer, DEFAULT_ALIGNMENT)) << bytes << " bytes at " << pointer;
    fill_block(pointer, bytes, 0xA5);
    EXPECT_TRUE(block_holds(pointer, bytes, 0xA5));
    resource.deallocate(pointer, bytes);
  }
}

TYPED_TEST_P(ResourceConformance, ZeroByteAllocationIsHarmless) {
  memory_resource& resource = this->resource();
  void* first               = resource.allocate(0);
  void* second              = resource.allocate(0, 256);
  resource.deallocate(second, 0, 256);
  resource.deallocate(first, 0);
  // The resource still serves ordinary requests afterwards.
  void* pointer = resource.allocate(128);
  ASSERT_NE(pointer, nullptr);
  fill_block(pointer, 128, 0x3C);
  EXPECT_TRUE(block_holds(pointer, 128, 0x3C));
  resource.deallocate(pointer, 128);
}

TYPED_TEST_P(ResourceConformance, IsEqualIsReflexive) {
  memory_resource& resource = this->resource();
  EXPECT_TRUE(resource.is_equal(resource));
  EXPECT_TRUE(resource_ref{resource} == resource_ref{resource});
}

TYPED_TEST_P(ResourceConformance, KindIsStable) {
  memory_resource& resource = this->resource();
  EXPECT_EQ(resource.kind(), TypeParam::kind);
  void* pointer = resource.allocate(4096);
  EXPECT_EQ(resource.kind(), TypeParam::kind);
  EXPECT_EQ(resource_ref{resource}.kind(), TypeParam::kind);
  resource.deallocate(pointer, 4096);
  EXPECT_EQ(resource.kind(), TypeParam::kind);
}

TYPED_TEST_P(ResourceConformance, ManyInterleavedAllocations) {
  struct block {
    void* pointer;
    std::size_t bytes;
    std::size_t alignment;
    unsigned char value;
  };
  memory_resource& resource = this->resource();
  std::vector<block> live;
  std::uint64_t state = 0x9E3779B97F4A7C15ULL;  // a fixed LCG: the same sequence every run
  auto next           = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<std::size_t>(state >> 33U);
  };
  auto check_and_free = [&](std::size_t index) {
    block const freed = live[index];
    EXPECT_TRUE(block_holds(freed.pointer, freed.bytes, freed.value))
      << "block " << freed.pointer << " of " << freed.bytes << " bytes was overwritten";
    resource.deallocate(freed.pointer, freed.bytes, freed.alignment);
    live[index] = live.back();
    live.pop_back();
  };
  constexpr std::size_t ROUNDS = 600;
  for (std::size_t round = 0; round < ROUNDS; ++round) {
    std::size_t const bytes     = 1 + next() % (96_KiB);
    std::size_t const alignment = std::size_t{8} << (next() % 10);  // 8 .. 4096
    auto const value            = static_cast<unsigned char>(1 + round % 251);
    void* pointer               = resource.allocate(bytes, alignment);
    ASSERT_NE(pointer, nullptr);
    ASSERT_TRUE(is_aligned(pointer, alignment));
    fill_block(pointer, bytes, value);
    live.push_back(block{pointer, bytes, alignment, value});
    if (round % 3 == 2) {
      check_and_free(next() % live.size());
    }
  }
  EXPECT_EQ(live.size(), ROUNDS - ROUNDS / 3);

  // Live blocks never overlap.
  std::vector<block> by_address = live;
  std::sort(by_address.begin(), by_address.end(), [](block const& a, block const& b) {
    return std::less<>{}(a.pointer, b.pointer);
  });
  for (std::size_t index = 1; index < by_address.size(); ++index) {
    auto const previous_end =
      reinterpret_cast<std::uintptr_t>(by_address[index - 1].pointer) + by_address[index - 1].bytes;
    EXPECT_LE(previous_end, reinterpret_cast<std::uintptr_t>(by_address[index].pointer));
  }
  while (!live.empty()) {
    check_and_free(live.size() - 1);
  }
}

REGISTER_TYPED_TEST_SUITE_P(ResourceConformance,
                            AllocatesEverySizeAndAlignment,
                            DefaultAlignmentIsHonoured,
                            ZeroByteAllocationIsHarmless,
                            IsEqualIsReflexive,
                            KindIsStable,
                            ManyInterleavedAllocations);

}  // namespace spillway::test
