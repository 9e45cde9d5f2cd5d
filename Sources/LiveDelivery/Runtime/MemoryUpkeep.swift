import CProcessControl

/// Gives memory the worker freed back to the system.
///
/// glibc's allocator keeps one arena per busy thread and returns an arena's free pages only from its top. After
/// a burst (a fault storm's retries, the backlog a broker restart leaves), the pages freed inside the arenas
/// stay resident, so a worker's RSS steps up at each burst and does not come down (`livedelivery-bench soak`
/// shows it). `malloc_trim(0)` releases the free pages inside every arena (`madvise(MADV_DONTNEED)`); it takes
/// each arena's lock in turn, briefly, and a worker calls it once per metrics sample.
enum MemoryUpkeep {
    static func returnFreedMemory() {
        _ = livedelivery_release_free_memory()
    }
}
