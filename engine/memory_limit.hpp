#pragma once
// What the machine offers: memory (physical and cgroup limit) and size strings like "16G".
#include <string>

namespace kinfer {

// Physical memory available to this process (the smaller of RAM and a cgroup limit), bytes.
double machine_memory_bytes();

// The default --max-memory: most of the machine's memory (85%).
double default_max_memory_bytes();

// Parses "123", "512M", "16G", "1.5GiB", "2T" (binary units). Throws std::invalid_argument.
double parse_size(const std::string& s);

}  // namespace kinfer
