// gpuarena-range-timer: each kernel's gpu__time_duration.sum, the hardware counter Nsight Compute
// reports as "Duration", read in-process through CUPTI's Range Profiler, so the harness can give
// ncu's own figure for a solution's kernels without running ncu (a process of its own, minutes
// per run). Loaded by range_timer.py with ctypes; a C ABI, no exit(): every failure is returned
// and its words kept for grt_error().
//
// Ranges are AUTO (CUPTI puts one around each kernel launch, serialising them as ncu does) and
// replay is KERNEL (CUPTI replays a kernel itself if the metric needed more than one pass; one
// metric should need one). Ranges come back in launch order.
//
//   grt_open(device, max_ranges, metrics)  once, on the thread whose CUDA context launches the
//       kernels; metrics: comma-separated metric names, or NULL for gpu__time_duration.sum alone
//   grt_start() ... kernels ... synchronise ... grt_stop() ... grt_read(out, capacity, &count)
//       out: count rows of one value per metric, in the order named; capacity counts rows;
//       returns 2 when the window launched more kernels than max_ranges (the counter data image
//       is sized by max_ranges, and the first window after opening costs about 1 ms of host time
//       per range on an H100: a caller opens small and grows)
//   grt_close()
//
// Build: g++ -O2 -std=c++17 -shared -fPIC range_timer.cpp -I$CUDA/include -I$CUDA/extras/CUPTI/include
//        -L$CUDA/extras/CUPTI/lib64 -L$CUDA/lib64/stubs -lcupti -lcuda -Wl,-rpath,$CUDA/extras/CUPTI/lib64
//        -o libgpuarena_range_timer.so

#include <cuda.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <cstdint>
#include <string>
#include <vector>

static const char* DEFAULT_METRICS = "gpu__time_duration.sum";

static std::vector<std::string> g_metric_names;  // what grt_open was asked for
static std::vector<const char*> g_metrics;       // pointers into g_metric_names, for CUPTI

static std::string g_error;
static CUcontext g_context = nullptr;
static CUdevice g_device = 0;
static bool g_retained = false;      // we retained the primary context, so we release it
static bool g_initialized = false;   // cuptiProfilerInitialize succeeded
static CUpti_Profiler_Host_Object* g_host = nullptr;
static CUpti_RangeProfiler_Object* g_profiler = nullptr;
static std::vector<uint8_t> g_config;
static std::vector<uint8_t> g_data;  // the counter data image; SetConfig keeps its address
static bool g_passes_done = false;

static int fail(const std::string& what) {
    g_error = what;
    return 1;
}

static bool cupti_ok(CUptiResult result, const char* call) {
    if (result == CUPTI_SUCCESS) return true;
    const char* text = "unknown";
    cuptiGetResultString(result, &text);
    g_error = std::string(call) + ": " + text;
    return false;
}

static bool cu_ok(CUresult result, const char* call) {
    if (result == CUDA_SUCCESS) return true;
    const char* text = "unknown";
    cuGetErrorString(result, &text);
    g_error = std::string(call) + ": " + text;
    return false;
}

#define CUPTI(call) \
    do { if (!cupti_ok(call, #call)) return 1; } while (0)
#define CU(call) \
    do { if (!cu_ok(call, #call)) return 1; } while (0)

static int reset_counter_data() {
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params image = {CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    image.pRangeProfilerObject = g_profiler;
    image.counterDataSize = g_data.size();
    image.pCounterData = g_data.data();
    CUPTI(cuptiRangeProfilerCounterDataImageInitialize(&image));
    return 0;
}

static int open_context(int device_index) {
    CU(cuInit(0));
    CU(cuDeviceGet(&g_device, device_index));
    CU(cuCtxGetCurrent(&g_context));
    if (g_context != nullptr) {
        CUdevice current;
        CU(cuCtxGetDevice(&current));
        if (current != g_device)
            return fail("the current CUDA context is on device " + std::to_string(current) + ", not " +
                        std::to_string(device_index));
        return 0;
    }
    CU(cuDevicePrimaryCtxRetain(&g_context, g_device));
    g_retained = true;
    CU(cuCtxSetCurrent(g_context));
    return 0;
}

static int open_profiler(int device_index, int max_ranges) {
    if (max_ranges < 1) return fail("max_ranges must be at least 1");
    CUpti_Profiler_Initialize_Params init = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    CUPTI(cuptiProfilerInitialize(&init));
    g_initialized = true;
    CUpti_Device_GetChipName_Params chip = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    chip.deviceIndex = device_index;
    CUPTI(cuptiDeviceGetChipName(&chip));
    std::string chip_name = chip.pChipName;

    CUpti_Profiler_GetCounterAvailability_Params avail = {CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
    avail.ctx = g_context;
    CUPTI(cuptiProfilerGetCounterAvailability(&avail));
    std::vector<uint8_t> availability(avail.counterAvailabilityImageSize);
    avail.pCounterAvailabilityImage = availability.data();
    CUPTI(cuptiProfilerGetCounterAvailability(&avail));

    CUpti_Profiler_Host_Initialize_Params host_init = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    host_init.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    host_init.pChipName = chip_name.c_str();
    host_init.pCounterAvailabilityImage = availability.data();
    CUPTI(cuptiProfilerHostInitialize(&host_init));
    g_host = host_init.pHostObject;

    CUpti_Profiler_Host_ConfigAddMetrics_Params add = {CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    add.pHostObject = g_host;
    add.ppMetricNames = g_metrics.data();
    add.numMetrics = g_metrics.size();
    CUPTI(cuptiProfilerHostConfigAddMetrics(&add));
    CUpti_Profiler_Host_GetConfigImageSize_Params config_size = {CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    config_size.pHostObject = g_host;
    CUPTI(cuptiProfilerHostGetConfigImageSize(&config_size));
    g_config.assign(config_size.configImageSize, 0);
    CUpti_Profiler_Host_GetConfigImage_Params get_config = {CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    get_config.pHostObject = g_host;
    get_config.pConfigImage = g_config.data();
    get_config.configImageSize = g_config.size();
    CUPTI(cuptiProfilerHostGetConfigImage(&get_config));

    CUpti_RangeProfiler_Enable_Params enable = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
    enable.ctx = g_context;
    CUPTI(cuptiRangeProfilerEnable(&enable));
    g_profiler = enable.pRangeProfilerObject;

    CUpti_RangeProfiler_GetCounterDataSize_Params data_size = {CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    data_size.pRangeProfilerObject = g_profiler;
    data_size.pMetricNames = g_metrics.data();
    data_size.numMetrics = g_metrics.size();
    data_size.maxNumOfRanges = size_t(max_ranges);
    data_size.maxNumRangeTreeNodes = uint32_t(max_ranges);
    CUPTI(cuptiRangeProfilerGetCounterDataSize(&data_size));
    g_data.assign(data_size.counterDataSize, 0);
    if (reset_counter_data() != 0) return 1;

    CUpti_RangeProfiler_SetConfig_Params set_config = {CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
    set_config.pRangeProfilerObject = g_profiler;
    set_config.configSize = g_config.size();
    set_config.pConfig = g_config.data();
    set_config.counterDataImageSize = g_data.size();
    set_config.pCounterDataImage = g_data.data();
    set_config.range = CUPTI_AutoRange;
    set_config.replayMode = CUPTI_KernelReplay;  // one pass for gpu__time_duration; user replay's first window costs the same
    set_config.maxRangesPerPass = size_t(max_ranges);
    set_config.numNestingLevels = 1;  // AUTO ranges are not nested
    set_config.minNestingLevel = 1;
    set_config.passIndex = 0;
    set_config.targetNestingLevel = 1;
    CUPTI(cuptiRangeProfilerSetConfig(&set_config));
    return 0;
}

static int read_ranges(double* out, int capacity, int* count) {
    CUpti_RangeProfiler_DecodeData_Params decode = {CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
    decode.pRangeProfilerObject = g_profiler;
    CUPTI(cuptiRangeProfilerDecodeData(&decode));
    if (!g_passes_done) return fail("cuptiRangeProfilerStop: not all replay passes were submitted");
    if (decode.numOfRangeDropped > 0) {  // 2: open again with more room (the caller's choice)
        fail(std::to_string(decode.numOfRangeDropped) + " kernel(s) dropped: more launches than max_ranges");
        return 2;
    }
    CUpti_RangeProfiler_GetCounterDataInfo_Params info = {CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
    info.pCounterDataImage = g_data.data();
    info.counterDataImageSize = g_data.size();
    CUPTI(cuptiRangeProfilerGetCounterDataInfo(&info));
    if (capacity < 0 || info.numTotalRanges > size_t(capacity))
        return fail(std::to_string(info.numTotalRanges) + " ranges, room for " + std::to_string(capacity));
    for (size_t i = 0; i < info.numTotalRanges; ++i) {
        CUpti_Profiler_Host_EvaluateToGpuValues_Params eval = {CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
        eval.pHostObject = g_host;
        eval.pCounterDataImage = g_data.data();
        eval.counterDataImageSize = g_data.size();
        eval.ppMetricNames = g_metrics.data();
        eval.numMetrics = g_metrics.size();
        eval.rangeIndex = i;
        eval.pMetricValues = &out[i * g_metrics.size()];  // gpu__time_duration is in nanoseconds
        CUPTI(cuptiProfilerHostEvaluateToGpuValues(&eval));
        *count = int(i + 1);
    }
    return 0;
}

extern "C" {

const char* grt_error(void) { return g_error.c_str(); }

void grt_close(void) {
    // Best effort, in reverse order; the first failure's words stay in grt_error().
    std::string first = g_error;
    if (g_profiler != nullptr) {
        CUpti_RangeProfiler_Disable_Params disable = {CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
        disable.pRangeProfilerObject = g_profiler;
        if (!cupti_ok(cuptiRangeProfilerDisable(&disable), "cuptiRangeProfilerDisable") && first.empty()) first = g_error;
        g_profiler = nullptr;
    }
    if (g_host != nullptr) {
        CUpti_Profiler_Host_Deinitialize_Params host_done = {CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
        host_done.pHostObject = g_host;
        if (!cupti_ok(cuptiProfilerHostDeinitialize(&host_done), "cuptiProfilerHostDeinitialize") && first.empty()) first = g_error;
        g_host = nullptr;
    }
    if (g_initialized) {
        CUpti_Profiler_DeInitialize_Params done = {CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE};
        if (!cupti_ok(cuptiProfilerDeInitialize(&done), "cuptiProfilerDeInitialize") && first.empty()) first = g_error;
        g_initialized = false;
    }
    if (g_retained) {
        cuDevicePrimaryCtxRelease(g_device);
        g_retained = false;
    }
    g_context = nullptr;
    g_config.clear();
    g_data.clear();
    g_metrics.clear();
    g_metric_names.clear();
    g_error = first;
}

static int parse_metrics(const char* csv) {
    std::string text = csv != nullptr ? csv : DEFAULT_METRICS;
    size_t begin = 0;
    while (begin <= text.size()) {
        size_t end = text.find(',', begin);
        if (end == std::string::npos) end = text.size();
        if (end == begin) return fail("grt_open: an empty metric name in '" + text + "'");
        g_metric_names.push_back(text.substr(begin, end - begin));
        begin = end + 1;
    }
    for (const std::string& name : g_metric_names) g_metrics.push_back(name.c_str());
    return 0;
}

int grt_metric_count(void) { return int(g_metrics.size()); }

int grt_open(int device_index, int max_ranges, const char* metrics) {
    g_error.clear();
    if (g_profiler != nullptr) return fail("grt_open: already open (grt_close first)");
    if (parse_metrics(metrics) != 0) {
        grt_close();
        return 1;
    }
    if (open_context(device_index) != 0 || open_profiler(device_index, max_ranges) != 0) {
        grt_close();  // keeps the error that stopped the opening
        return 1;
    }
    return 0;
}

int grt_start(void) {
    if (g_profiler == nullptr) return fail("grt_start: not open");
    g_passes_done = false;
    CUpti_RangeProfiler_Start_Params start = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
    start.pRangeProfilerObject = g_profiler;
    CUPTI(cuptiRangeProfilerStart(&start));
    return 0;
}

int grt_stop(void) {
    if (g_profiler == nullptr) return fail("grt_stop: not open");
    CUpti_RangeProfiler_Stop_Params stop = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
    stop.pRangeProfilerObject = g_profiler;
    CUPTI(cuptiRangeProfilerStop(&stop));
    g_passes_done = stop.isAllPassSubmitted != 0;  // KERNEL replay runs every pass inside the window
    return 0;
}

int grt_read(double* out, int capacity, int* count) {
    *count = 0;
    if (g_profiler == nullptr) return fail("grt_read: not open");
    int failed = read_ranges(out, capacity, count);
    std::string error = g_error;
    if (reset_counter_data() != 0) return 1;  // the next window begins empty, whatever happened here
    g_error = error;
    if (failed) *count = 0;
    return failed;
}

}  // extern "C"
