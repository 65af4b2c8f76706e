// gpuarena-pm-sampler: how busy the GPU's SMs were, read from the device's own performance
// monitors by a process of its own (CUPTI PM sampling), so that a worker's claimed device time
// can be checked against something the worker's process cannot edit.
//
// Protocol, one line each way on stdin/stdout:
// Arguments: device index, sampling interval (sysclk cycles), samples per image, activity metric,
// traffic metrics (comma-separated: the first the chip reads in the same pass is summed; "" for none).
//   on start   -> {"ready": true, "chip": "GH100", "image_bytes": N, "traffic": "dram__bytes_read.sum" or "",
//                  "traffic_error": "why none"}  or  {"error": "..."} and exit 1
//   "start"    -> {"started": true}                  sampling runs from here
//   "mark"     -> {"busy_ns": B, "span_ns": S, "samples": N, "overflow": 0|1, "read_bytes": R}  so far,
//                 sampling on (read_bytes: the traffic metric summed over the samples, -1 without one)
//   "windows T0 T1 [T0 T1 ...]" -> {"windows": [[B, S, N, R], ...], "overflow": 0|1}: the same figures
//                 between instants of the samples' own clock (about CLOCK_REALTIME's), each sample
//                 across an end by its share inside; it waits for the sample that holds the last end
//   "samples N" -> {"samples": [[start, end, B, R], ...], ...}: the newest N samples decoded, newest first
//   "clock"    -> {"cupti_ns": C, "realtime_ns": R, "monotonic_ns": M, "raw_ns": W}: the host's clocks now
//   "stop"     -> the same, and sampling ends
//   "quit"     -> exits (sampling ended first, if on)
// Starting and stopping cost tens of ms each, a mark about one decoding pass: a caller reads many
// short segments of one window as differences of marks.
// busy_ns sums, over the completed samples, sm__cycles_active.max / gr__cycles_elapsed.max x the
// sample's span: the busiest SM's time with a warp resident. It stays at or under the kernels'
// own time (H100: 0.52-1.16 x CUPTI's), so it bounds a claim from below. The first sample of a
// session spans the set-up, so it is left out; the caller waits a few intervals after "started"
// and before "stop". Samples are decoded all through the window by a thread of its own (as
// CUPTI's pm_sampling sample does), so a long window cannot fill the hardware buffer (a decode
// after the window once failed with ERROR_OUT_OF_MEMORY on an H100). A decoding error is answered
// as {"error": ...} and the sampler carries on.
//
// Build: g++ -O2 -std=c++17 pm_sampler.cpp -I$CUDA/include -I$CUDA/extras/CUPTI/include
//        -L$CUDA/extras/CUPTI/lib64 -L$CUDA/lib64/stubs -lcupti -lcuda -Wl,-rpath,$CUDA/extras/CUPTI/lib64

#include <cuda.h>
#include <cupti_activity.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>

#include <time.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

static void fail(const std::string& what) {
    std::printf("{\"error\": \"%s\"}\n", what.c_str());
    std::fflush(stdout);
    std::exit(1);
}

static void check(CUptiResult result, const char* call) {
    if (result != CUPTI_SUCCESS) {
        const char* text = "unknown";
        cuptiGetResultString(result, &text);
        fail(std::string(call) + ": " + text);
    }
}

static void check_cu(CUresult result, const char* call) {
    if (result != CUDA_SUCCESS) {
        const char* text = "unknown";
        cuGetErrorString(result, &text);
        fail(std::string(call) + ": " + text);
    }
}

#define CUPTI(call) check(call, #call)
#define CU(call) check_cu(call, #call)

// Samples kept for "windows" (about a minute at 120 us each): a window is asked for within
// milliseconds of its end, so older ones are never needed.
static const size_t KEPT_SAMPLES = 1u << 19;

static uint64_t clock_ns(clockid_t which) {
    timespec now;
    clock_gettime(which, &now);
    return uint64_t(now.tv_sec) * 1000000000ull + uint64_t(now.tv_nsec);
}

static std::vector<const char*> METRICS = {"gr__cycles_elapsed.max", "sm__cycles_active.max"};
static const char* DEFAULT_TRAFFIC = "dram__bytes_read.sum,dram__bytes.sum";

// A host object configured for `metrics` and its config image, or false and why (the chip
// cannot read them, or not in one pass).
static bool configure(const std::string& chip_name, std::vector<uint8_t>& availability,
                      std::vector<const char*>& metrics, CUpti_Profiler_Host_Object** host_out,
                      std::vector<uint8_t>& config, std::string& why) {
    CUpti_Profiler_Host_Initialize_Params host_init = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    host_init.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
    host_init.pChipName = chip_name.c_str();
    host_init.pCounterAvailabilityImage = availability.data();
    CUPTI(cuptiProfilerHostInitialize(&host_init));
    CUpti_Profiler_Host_Object* host = host_init.pHostObject;
    auto failed = [&](CUptiResult result, const char* call) {
        const char* text = "unknown";
        cuptiGetResultString(result, &text);
        why = std::string(call) + ": " + text;
        CUpti_Profiler_Host_Deinitialize_Params done = {CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
        done.pHostObject = host;
        cuptiProfilerHostDeinitialize(&done);
        return false;
    };
    CUpti_Profiler_Host_ConfigAddMetrics_Params add = {CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    add.pHostObject = host;
    add.ppMetricNames = metrics.data();
    add.numMetrics = metrics.size();
    CUptiResult result = cuptiProfilerHostConfigAddMetrics(&add);
    if (result != CUPTI_SUCCESS) return failed(result, "cuptiProfilerHostConfigAddMetrics");
    CUpti_Profiler_Host_GetConfigImageSize_Params config_size = {CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    config_size.pHostObject = host;
    result = cuptiProfilerHostGetConfigImageSize(&config_size);
    if (result != CUPTI_SUCCESS) return failed(result, "cuptiProfilerHostGetConfigImageSize");
    config.assign(config_size.configImageSize, 0);
    CUpti_Profiler_Host_GetConfigImage_Params get_config = {CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    get_config.pHostObject = host;
    get_config.pConfigImage = config.data();
    get_config.configImageSize = config.size();
    result = cuptiProfilerHostGetConfigImage(&get_config);
    if (result != CUPTI_SUCCESS) return failed(result, "cuptiProfilerHostGetConfigImage");
    *host_out = host;
    return true;
}

int main(int argc, char** argv) {
    int device = argc > 1 ? std::atoi(argv[1]) : 0;
    uint64_t interval = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 200000;  // sysclk cycles
    // samples per counter data image: every decoding pass re-initialises the whole image, so a big
    // one makes each pass (and each mark) slow; a full image is simply decoded again
    uint64_t max_samples = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1000;
    if (argc > 4) METRICS[1] = argv[4];  // the activity metric (default sm__cycles_active.max)
    std::string traffic_choices = argc > 5 ? argv[5] : DEFAULT_TRAFFIC;

    CU(cuInit(0));
    CUdevice cu_device;
    CU(cuDeviceGet(&cu_device, device));
    CUcontext context;
    CU(cuDevicePrimaryCtxRetain(&context, cu_device));
    CU(cuCtxSetCurrent(context));

    CUpti_Profiler_Initialize_Params init = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    CUPTI(cuptiProfilerInitialize(&init));
    CUpti_Device_GetChipName_Params chip = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    chip.deviceIndex = device;
    CUPTI(cuptiDeviceGetChipName(&chip));
    std::string chip_name = chip.pChipName;

    CUpti_PmSampling_GetCounterAvailability_Params avail = {CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE};
    avail.deviceIndex = device;
    CUPTI(cuptiPmSamplingGetCounterAvailability(&avail));
    std::vector<uint8_t> availability(avail.counterAvailabilityImageSize);
    avail.pCounterAvailabilityImage = availability.data();
    CUPTI(cuptiPmSamplingGetCounterAvailability(&avail));

    // The activity metric and the first traffic metric the chip reads in the same pass; without
    // one, the activity metric alone (the caller is told why and judges without traffic).
    CUpti_Profiler_Host_Object* host = nullptr;
    std::vector<uint8_t> config;
    static std::string traffic;  // METRICS points into it
    std::string traffic_error, why;
    for (size_t at = 0; at < traffic_choices.size() && traffic.empty();) {
        size_t comma = traffic_choices.find(',', at);
        if (comma == std::string::npos) comma = traffic_choices.size();
        std::string choice = traffic_choices.substr(at, comma - at);
        at = comma + 1;
        if (choice.empty()) continue;
        std::vector<const char*> with = {METRICS[0], METRICS[1], choice.c_str()};
        if (configure(chip_name, availability, with, &host, config, why)) {
            traffic = choice;
        } else {
            traffic_error += (traffic_error.empty() ? "" : "; ") + choice + ": " + why;
        }
    }
    if (traffic.empty()) {
        if (!configure(chip_name, availability, METRICS, &host, config, why)) fail(why);
    } else {
        METRICS.push_back(traffic.c_str());
    }
    for (char& c : traffic_error) {
        if (c == '"' || c == '\\') c = '\'';
    }

    CUpti_PmSampling_Enable_Params enable = {CUpti_PmSampling_Enable_Params_STRUCT_SIZE};
    enable.deviceIndex = device;
    CUPTI(cuptiPmSamplingEnable(&enable));
    CUpti_PmSampling_Object* sampler = enable.pPmSamplingObject;

    CUpti_PmSampling_SetConfig_Params set_config = {CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE};
    set_config.pPmSamplingObject = sampler;
    set_config.configSize = config.size();
    set_config.pConfig = config.data();
    set_config.hardwareBufferSize = 256u << 20;
    set_config.samplingInterval = interval;
    set_config.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL;
    CUPTI(cuptiPmSamplingSetConfig(&set_config));

    CUpti_PmSampling_GetCounterDataSize_Params data_size = {CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE};
    data_size.pPmSamplingObject = sampler;
    data_size.numMetrics = METRICS.size();
    data_size.pMetricNames = METRICS.data();
    data_size.maxSamples = max_samples;
    CUPTI(cuptiPmSamplingGetCounterDataSize(&data_size));
    std::vector<uint8_t> data(data_size.counterDataSize);
    auto reset = [&]() {
        CUpti_PmSampling_CounterDataImage_Initialize_Params image = {CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE};
        image.pPmSamplingObject = sampler;
        image.counterDataSize = data.size();
        image.pCounterData = data.data();
        CUPTI(cuptiPmSamplingCounterDataImageInitialize(&image));
    };

    // Decoding runs all through a window (as CUPTI's own sample does), so a long window never
    // fills the hardware buffer; each pass adds its completed samples to the totals and resets.
    double busy_ns = 0, span_ns = 0, read_bytes = 0;
    uint64_t samples = 0, seen = 0;
    struct Kept {
        uint64_t start, end;
        double busy_ns, read_bytes;
    };
    std::deque<Kept> kept;  // the window's samples, newest last, for "windows" and "samples"
    int overflow = 0;
    std::string decode_error;
    auto decode_pass = [&]() -> bool {  // true: the counter data image was full, go again
        CUpti_PmSampling_DecodeData_Params decode = {CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE};
        decode.pPmSamplingObject = sampler;
        decode.pCounterDataImage = data.data();
        decode.counterDataImageSize = data.size();
        CUptiResult result = cuptiPmSamplingDecodeData(&decode);
        if (result != CUPTI_SUCCESS) {
            const char* text = "unknown";
            cuptiGetResultString(result, &text);
            decode_error = std::string("cuptiPmSamplingDecodeData: ") + text;
            return false;
        }
        overflow |= decode.overflow ? 1 : 0;
        CUpti_PmSampling_GetCounterDataInfo_Params info = {CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE};
        info.pCounterDataImage = data.data();
        info.counterDataImageSize = data.size();
        CUPTI(cuptiPmSamplingGetCounterDataInfo(&info));
        for (size_t i = 0; i < info.numCompletedSamples; ++i, ++seen) {
            if (seen == 0) continue;  // spans the set-up, not the window
            CUpti_PmSampling_CounterData_GetSampleInfo_Params sample = {CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE};
            sample.pPmSamplingObject = sampler;
            sample.pCounterDataImage = data.data();
            sample.counterDataImageSize = data.size();
            sample.sampleIndex = i;
            CUPTI(cuptiPmSamplingCounterDataGetSampleInfo(&sample));
            double values[3] = {0, 0, 0};
            CUpti_Profiler_Host_EvaluateToGpuValues_Params eval = {CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
            eval.pHostObject = host;
            eval.pCounterDataImage = data.data();
            eval.counterDataImageSize = data.size();
            eval.ppMetricNames = METRICS.data();
            eval.numMetrics = METRICS.size();
            eval.rangeIndex = i;
            eval.pMetricValues = values;
            CUPTI(cuptiProfilerHostEvaluateToGpuValues(&eval));
            double width = double(sample.endTimestamp - sample.startTimestamp);
            span_ns += width;
            samples += 1;
            read_bytes += values[2];  // 0 without a traffic metric
            double busy = 0;
            if (values[0] > 0) {
                double fraction = values[1] / values[0];
                busy = (fraction < 1 ? fraction : 1) * width;
                busy_ns += busy;
            }
            kept.push_back({sample.startTimestamp, sample.endTimestamp, busy, values[2]});
            if (kept.size() > KEPT_SAMPLES) kept.pop_front();
        }
        reset();
        return decode.decodeStopReason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL;
    };

    std::printf("{\"ready\": true, \"chip\": \"%s\", \"image_bytes\": %zu, \"traffic\": \"%s\", \"traffic_error\": \"%s\"}\n",
                chip_name.c_str(), data.size(), traffic.c_str(), traffic_error.c_str());
    std::fflush(stdout);

    std::atomic<bool> sampling{false};
    std::mutex decoding;  // one decoding pass at a time: the thread's, or a mark's
    std::thread decoder;
    auto totals = [&]() {
        if (!decode_error.empty()) {
            std::printf("{\"error\": \"%s\"}\n", decode_error.c_str());
        } else {
            std::printf("{\"busy_ns\": %.0f, \"span_ns\": %.0f, \"samples\": %llu, \"overflow\": %d, \"read_bytes\": %.0f}\n",
                        busy_ns, span_ns, (unsigned long long)samples, overflow, traffic.empty() ? -1.0 : read_bytes);
        }
        std::fflush(stdout);
    };
    std::string line;
    while (std::getline(std::cin, line)) {
        if (line == "quit") {
            if (sampling) {  // a window kept open for the next job (harness/warm.py): ended here
                CUpti_PmSampling_Stop_Params stop = {CUpti_PmSampling_Stop_Params_STRUCT_SIZE};
                stop.pPmSamplingObject = sampler;
                cuptiPmSamplingStop(&stop);
                sampling = false;
                decoder.join();
            }
            break;
        }
        if (line == "start") {
            if (sampling) fail("start while sampling");
            reset();
            busy_ns = span_ns = read_bytes = 0;
            samples = seen = 0;
            kept.clear();
            overflow = 0;
            decode_error.clear();
            CUpti_PmSampling_Start_Params start = {CUpti_PmSampling_Start_Params_STRUCT_SIZE};
            start.pPmSamplingObject = sampler;
            CUPTI(cuptiPmSamplingStart(&start));
            sampling = true;
            decoder = std::thread([&]() {
                while (sampling) {
                    {
                        std::lock_guard<std::mutex> hold(decoding);
                        if (!decode_error.empty()) break;
                        decode_pass();
                    }
                    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // ~170 samples a pass
                }
            });
            std::printf("{\"started\": true}\n");
            std::fflush(stdout);
            continue;
        }
        if (line == "clock") {  // the clocks a window's ends could be read in, at one instant
            uint64_t cupti = 0;
            cuptiGetTimestamp(&cupti);
            std::printf("{\"cupti_ns\": %llu, \"realtime_ns\": %llu, \"monotonic_ns\": %llu, \"raw_ns\": %llu}\n",
                        (unsigned long long)cupti, (unsigned long long)clock_ns(CLOCK_REALTIME),
                        (unsigned long long)clock_ns(CLOCK_MONOTONIC), (unsigned long long)clock_ns(CLOCK_MONOTONIC_RAW));
            std::fflush(stdout);
            continue;
        }
        if (line.rfind("samples ", 0) == 0) {  // "samples N": the newest N samples decoded, newest first
            if (!sampling) fail("samples without start");
            size_t count = std::strtoull(line.c_str() + 8, nullptr, 10);
            std::string listed;
            std::lock_guard<std::mutex> hold(decoding);
            for (int pass = 0; pass < 1000 && decode_error.empty() && decode_pass(); ++pass) {
            }
            for (auto it = kept.rbegin(); it != kept.rend() && count > 0; ++it, --count) {
                char item[160];
                std::snprintf(item, sizeof item, "%s[%llu, %llu, %.0f, %.0f]", listed.empty() ? "" : ", ",
                              (unsigned long long)it->start, (unsigned long long)it->end, it->busy_ns, it->read_bytes);
                listed += item;
            }
            std::printf("{\"samples\": [%s], \"overflow\": %d}\n", listed.c_str(), overflow);
            std::fflush(stdout);
            continue;
        }
        if (line.rfind("windows ", 0) == 0) {
            // "windows T0 T1 [T0 T1 ...]": the samples' figures between pairs of instants of their
            // own clock, each sample across an end counted by its share inside; it waits until a
            // sample that ends at or after the last T1 is decoded.
            if (!sampling) fail("windows without start");
            std::vector<unsigned long long> ends;
            {
                const char* at = line.c_str() + 8;
                char* next = nullptr;
                for (unsigned long long value = std::strtoull(at, &next, 10); next != at; value = std::strtoull(at, &next, 10)) {
                    ends.push_back(value);
                    at = next;
                }
            }
            if (ends.empty() || ends.size() % 2 != 0) fail("bad windows: " + line);
            unsigned long long last = 0;
            for (size_t k = 0; k < ends.size(); k += 2) {
                if (ends[k + 1] < ends[k]) fail("bad windows: " + line);
                last = ends[k + 1] > last ? ends[k + 1] : last;
            }
            auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
            bool reached = false;
            for (bool first = true; true; first = false) {
                {
                    std::lock_guard<std::mutex> hold(decoding);
                    for (int pass = 0; pass < 1000 && decode_error.empty() && decode_pass(); ++pass) {
                    }
                    reached = !kept.empty() && kept.back().end >= last;
                }
                if (reached || !decode_error.empty() || std::chrono::steady_clock::now() > deadline) break;
                std::this_thread::sleep_for(std::chrono::microseconds(first ? 100 : 50));
            }
            if (!decode_error.empty()) {
                totals();
                continue;
            }
            if (!reached) {
                std::printf("{\"error\": \"no sample reached the windows' end within 2 s\"}\n");
                std::fflush(stdout);
                continue;
            }
            std::string listed;
            std::lock_guard<std::mutex> hold(decoding);
            for (size_t k = 0; k < ends.size(); k += 2) {
                uint64_t t0 = ends[k], t1 = ends[k + 1];
                double w_busy = 0, w_span = 0, w_read = 0;
                unsigned long long w_samples = 0;
                for (auto it = kept.rbegin(); it != kept.rend() && it->end > t0; ++it) {
                    if (it->start >= t1 || it->end <= it->start) continue;
                    uint64_t from = it->start > t0 ? it->start : t0, to = it->end < t1 ? it->end : t1;
                    double share = double(to - from) / double(it->end - it->start);
                    w_busy += share * it->busy_ns;
                    w_read += share * it->read_bytes;
                    w_span += double(to - from);
                    w_samples += 1;
                }
                char item[200];
                std::snprintf(item, sizeof item, "%s[%.0f, %.0f, %llu, %.0f]", listed.empty() ? "" : ", ", w_busy, w_span,
                              w_samples, traffic.empty() ? -1.0 : w_read);
                listed += item;
            }
            std::printf("{\"windows\": [%s], \"overflow\": %d}\n", listed.c_str(), overflow);
            std::fflush(stdout);
            continue;
        }
        if (line == "mark") {
            if (!sampling) fail("mark without start");
            std::lock_guard<std::mutex> hold(decoding);
            for (int pass = 0; pass < 1000 && decode_error.empty() && decode_pass(); ++pass) {
            }
            totals();
            continue;
        }
        if (line != "stop") fail("unknown command: " + line);
        if (!sampling) fail("stop without start");
        CUpti_PmSampling_Stop_Params stop = {CUpti_PmSampling_Stop_Params_STRUCT_SIZE};
        stop.pPmSamplingObject = sampler;
        CUPTI(cuptiPmSamplingStop(&stop));
        sampling = false;
        decoder.join();
        for (int pass = 0; pass < 1000 && decode_error.empty() && decode_pass(); ++pass) {
        }
        totals();
    }

    CUpti_PmSampling_Disable_Params disable = {CUpti_PmSampling_Disable_Params_STRUCT_SIZE};
    disable.pPmSamplingObject = sampler;
    cuptiPmSamplingDisable(&disable);
    CUpti_Profiler_Host_Deinitialize_Params host_done = {CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
    host_done.pHostObject = host;
    cuptiProfilerHostDeinitialize(&host_done);
    CUpti_Profiler_DeInitialize_Params done = {CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE};
    cuptiProfilerDeInitialize(&done);
    return 0;
}
