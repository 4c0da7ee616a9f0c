#pragma once
// Allocator settings for the long-running server process.

namespace hyllm {

// glibc's malloc raises its mmap threshold (up to 32 MiB) each time a block
// it had mapped is freed, so after the first large request, buffers of that
// size come from the freeing thread's arena instead, and stay there when
// freed (only an arena's top is given back). The server handles requests on
// many connection threads, each with an arena of its own, so one large
// request per thread (a prompt of a megabyte, refused after tokenizing)
// leaves tens of megabytes on each, and the process grows with the number of
// threads that have seen one. Fixed thresholds turn the adjustment off:
// blocks of kMmapThresholdBytes and more are always mapped and go back to the
// system when freed; smaller ones (most per-request and per-step buffers)
// keep reusing arena memory, and an arena keeps up to kTrimThresholdBytes
// free at its top (glibc's default of 128 KiB would return and fault in the
// pages of those buffers again on every request). Call once at startup.
// Does nothing without glibc.
inline constexpr int kMmapThresholdBytes = 1 << 20;
inline constexpr int kTrimThresholdBytes = 4 << 20;
void keep_large_blocks_out_of_malloc_arenas();

}  // namespace hyllm
