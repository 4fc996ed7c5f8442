"""What a magic reads of this kernel process: profiles, the allocator, memory, precision."""
