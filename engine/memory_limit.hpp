#pragma once
// What the machine offers: memory (physical and cgroup limit) and size strings like "16G".
#include <string>

namespace kinfer {

// Physical memory available to this process (the smaller of RAM and a cgroup limit), bytes.
double machine_memory_bytes();

// Memory the system can give this process now (0: unknown): the kernel's MemAvailable (free
// memory and what it can reclaim), and what the cgroup's limit leaves over its current use.
double available_memory_bytes();

// The default --max-memory: most of the machine's memory (85%).
double default_max_memory_bytes();

// Parses "123", "512M", "16G", "1.5GiB", "2T" (binary units). Throws std::invalid_argument.
double parse_size(const std::string& s);

// Large tables come from mmap and go back to the system when freed: the allocator's own
// high-water marks (glibc raises its mmap threshold up to 32 MiB after the first large free,
// so later tables below it stay in the heap and fragment it) would otherwise put the peak RSS
// above what is alive. Called once at program start.
void bound_allocator();

}  // namespace kinfer
