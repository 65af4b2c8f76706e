// gpuarena-activity-timer: the device busy time of each timed call, from CUPTI's activity records,
// with nothing between the harness and CUPTI. torch's Kineto profiler gave the same figure, but
// one Kineto session (start, stop, its records turned into Python objects) cost 10-15 ms of host
// time per block of 64 calls on an H200, once per worker request and per reference block: about a
// third of a small problem's whole verdict (issue 47). Loaded by activity_timer.py with ctypes; a
// C ABI, no exit(): every failure is returned and its words kept for gat_error().
//
//   gat_begin()       clear, (re)claim CUPTI's activity buffers, enable the kinds: kernels,
//                     copies, memsets, and the runtime and driver calls that launched them
//   gat_now()         CUPTI's clock (the activity records' own), for the windows' marks
//   gat_end(calls, n, harness, m, out, own)
//                     flush, disable, and per timed call k (its window calls[2k]..calls[2k+1])
//                     the union of the device intervals of all work launched inside it, on any
//                     stream and from any thread; work launched inside one of the m harness
//                     windows is nobody's (*own counts it: the harness knows what it launched
//                     and checks it was seen); work launched outside every window is billed to
//                     the call before it (work a solution defers past its return). out: n
//                     values, ns. Returns the number of device records seen, or -1 (gat_error
//                     says why).
//
// The kernel, memcpy and memset records are read through the newest structs the toolkit's
// cupti_activity.h declares (KERNEL_RECORD, MEMCPY_RECORD, MEMSET_RECORD, chosen by
// activity_timer.py); the fields read (start, end, correlationId) sit in the prefix every
// version shares.

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

extern "C" {
static bool inside(const std::vector<std::pair<uint64_t, uint64_t>>& windows, uint64_t stamp, size_t* at) {
    auto after = std::upper_bound(windows.begin(), windows.end(), std::make_pair(stamp, UINT64_MAX));
    if (after == windows.begin()) return false;
    --after;
    if (stamp > after->second) return false;
    *at = static_cast<size_t>(after - windows.begin());
    return true;
}

// Each call's busy time from the records: work (w triples: correlation id, start, end), launches
// (l pairs: correlation id, the launching call's start), the calls' and the harness's windows.
long long gat_attribute(const uint64_t* work, int w, const uint64_t* launches, int l, const uint64_t* calls, int n,
                        const uint64_t* harness, int m, uint64_t* out, long long* own) {
    *own = 0;
    std::unordered_map<uint64_t, uint64_t> launched;
    for (int i = 0; i < l; ++i) launched.emplace(launches[2 * i], launches[2 * i + 1]);
    std::vector<std::pair<uint64_t, uint64_t>> windows, own_windows;
    for (int k = 0; k < n; ++k) windows.emplace_back(calls[2 * k], calls[2 * k + 1]);
    for (int k = 0; k < m; ++k) own_windows.emplace_back(harness[2 * k], harness[2 * k + 1]);
    std::sort(own_windows.begin(), own_windows.end());
    std::vector<std::vector<std::pair<uint64_t, uint64_t>>> per_call(n);
    for (int i = 0; i < w; ++i) {
        uint64_t correlation = work[3 * i], start = work[3 * i + 1], end = work[3 * i + 2];
        auto found = launched.find(correlation);
        uint64_t stamp = found != launched.end() ? found->second : start;
        size_t k = 0;
        if (!inside(windows, stamp, &k)) {
            size_t unused = 0;
            if (inside(own_windows, stamp, &unused)) {  // the harness's own
                ++*own;
                continue;
            }
            // launched outside every window: the call before it pays (work deferred past a return)
            auto after = std::upper_bound(windows.begin(), windows.end(), std::make_pair(stamp, UINT64_MAX));
            k = after == windows.begin() ? 0 : static_cast<size_t>(after - windows.begin()) - 1;
        }
        if (n > 0) per_call[k].emplace_back(start, end);
    }
    for (int k = 0; k < n; ++k) {  // the union of each call's intervals
        auto& spans = per_call[k];
        std::sort(spans.begin(), spans.end());
        uint64_t total = 0, from = 0, to = 0;
        bool open = false;
        for (const auto& span : spans) {
            if (!open || span.first > to) {
                if (open) total += to - from;
                from = span.first;
                to = span.second;
                open = true;
            } else {
                to = std::max(to, span.second);
            }
        }
        if (open) total += to - from;
        out[k] = total;
    }
    return w;
}

}  // extern "C"

#ifndef GAT_ATTRIBUTION_ONLY  // the attribution alone builds without CUDA (tests/test_activity_timer.py)
#include <cupti.h>

#ifndef KERNEL_RECORD
#define KERNEL_RECORD CUpti_ActivityKernel9
#endif
#ifndef MEMCPY_RECORD
#define MEMCPY_RECORD CUpti_ActivityMemcpy5
#endif
#ifndef MEMSET_RECORD
#define MEMSET_RECORD CUpti_ActivityMemset4
#endif

static const size_t BUFFER_BYTES = 4 << 20;
static const CUpti_ActivityKind KINDS[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_RUNTIME,           CUPTI_ACTIVITY_KIND_DRIVER,
};

static std::mutex g_lock;  // buffers may complete on CUPTI's own thread
static std::vector<uint64_t> g_work;      // device work: correlation id, start, end
static std::vector<uint64_t> g_launches;  // API calls: correlation id, start
static uint64_t g_dropped = 0;
static std::string g_error;

static bool cupti_ok(CUptiResult result, const char* call) {
    if (result == CUPTI_SUCCESS) return true;
    const char* text = "unknown";
    cuptiGetResultString(result, &text);
    g_error = std::string(call) + ": " + text;
    return false;
}

static void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, BUFFER_BYTES));
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    std::lock_guard<std::mutex> hold(g_lock);
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
        switch (record->kind) {
            case CUPTI_ACTIVITY_KIND_KERNEL:
            case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
                auto* r = reinterpret_cast<KERNEL_RECORD*>(record);
                g_work.insert(g_work.end(), {r->correlationId, r->start, r->end});
                break;
            }
            case CUPTI_ACTIVITY_KIND_MEMCPY: {
                auto* r = reinterpret_cast<MEMCPY_RECORD*>(record);
                g_work.insert(g_work.end(), {r->correlationId, r->start, r->end});
                break;
            }
            case CUPTI_ACTIVITY_KIND_MEMSET: {
                auto* r = reinterpret_cast<MEMSET_RECORD*>(record);
                g_work.insert(g_work.end(), {r->correlationId, r->start, r->end});
                break;
            }
            case CUPTI_ACTIVITY_KIND_RUNTIME:
            case CUPTI_ACTIVITY_KIND_DRIVER: {
                auto* r = reinterpret_cast<CUpti_ActivityAPI*>(record);
                if (r->correlationId) g_launches.insert(g_launches.end(), {r->correlationId, r->start});
                break;
            }
            default:
                break;
        }
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS) g_dropped += dropped;
    std::free(buffer);
}

extern "C" {

const char* gat_error() { return g_error.c_str(); }

uint64_t gat_now() {
    uint64_t now = 0;
    cuptiGetTimestamp(&now);
    return now;
}

int gat_begin() {
    {
        std::lock_guard<std::mutex> hold(g_lock);
        g_work.clear();
        g_launches.clear();
        g_dropped = 0;
    }
    // claimed again every block: another client of CUPTI in this process (torch's profiler, which
    // the solution may start) registers its own and would otherwise take the records
    if (!cupti_ok(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks"))
        return -1;
    for (CUpti_ActivityKind kind : KINDS)
        if (!cupti_ok(cuptiActivityEnable(kind), "cuptiActivityEnable")) return -1;
    return 0;
}

long long gat_end(const uint64_t* calls, int n, const uint64_t* harness, int m, uint64_t* out, long long* own) {
    for (CUpti_ActivityKind kind : KINDS) cuptiActivityDisable(kind);
    if (!cupti_ok(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll")) return -1;
    std::lock_guard<std::mutex> hold(g_lock);
    if (g_dropped) {
        g_error = "CUPTI dropped " + std::to_string(g_dropped) + " activity records";
        return -1;
    }
    return gat_attribute(g_work.data(), static_cast<int>(g_work.size() / 3), g_launches.data(),
                         static_cast<int>(g_launches.size() / 2), calls, n, harness, m, out, own);
}

}  // extern "C"
#endif
