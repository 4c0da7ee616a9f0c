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
// pages of those buffers again on every request).
inline constexpr int kMmapThresholdBytes = 1 << 20;
inline constexpr int kTrimThresholdBytes = 4 << 20;

// What the arenas keep is therefore up to kTrimThresholdBytes each, and
// glibc makes up to 8 arenas per core (128 on a 16-core GPU host): a new
// thread takes an arena of its own while there are fewer. A connection
// thread whose request needed a few megabytes of blocks under the mmap
// threshold (the 1 MiB prompt again: its body, JSON string and token
// vectors grow through them) keeps that much at its arena's top, and
// malloc_trim() does not return the top of a thread's arena (only the main
// arena's), so the process grows with the number of threads that have seen
// such a request, for as long as new threads see one. A fixed arena count
// bounds it at kMaxMallocArenas x kTrimThresholdBytes whatever the core
// count; threads beyond it share arenas, and a thread's small allocations
// mostly come from its own cache (tcache) without the arena's lock.
inline constexpr int kMaxMallocArenas = 8;

// Applies the settings above. Call once at startup, before the server's
// threads start. Does nothing without glibc.
void tune_malloc_for_serving();

}  // namespace hyllm
