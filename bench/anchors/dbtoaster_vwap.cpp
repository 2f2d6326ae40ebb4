// Times DBToaster's generated batch C++ for the finance VWAP query on a stream of bids events.
//
// The generated program (its header, `vwap_dbt.h`, and DBToaster's C++ runtime headers) is not part of
// this repository: bench/anchors/build_dbtoaster_vwap.sh makes it from public sources and compiles this
// driver against it. Usage: dbtoaster_vwap EVENTS BATCH
//   EVENTS: one event per line, "delta t id broker_id volume price" (what bench/native_vwap.py writes);
//   BATCH:  events per call of the generated batch trigger.
// The stream is read and cut into batches before the clock starts; the clock covers the trigger calls
// and the result read after each batch. Prints one JSON object.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "vwap_dbt.h"

using Batch = std::vector<dbtoaster::BatchMessage<dbtoaster::data_t::BidsAdaptor::MessageType, int>::KVpair>;

static double seconds(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s EVENTS BATCH\n", argv[0]);
    return 2;
  }
  FILE* in = std::fopen(argv[1], "r");
  if (!in) {
    std::fprintf(stderr, "cannot open %s\n", argv[1]);
    return 2;
  }
  long batch_size = std::atol(argv[2]);
  if (batch_size < 1) {
    std::fprintf(stderr, "BATCH must be >= 1\n");
    return 2;
  }
  std::vector<Batch> batches;
  long events = 0;
  int delta;
  double t, volume, price;
  long id, broker;
  while (std::fscanf(in, "%d %lf %ld %ld %lf %lf", &delta, &t, &id, &broker, &volume, &price) == 6) {
    if (events % batch_size == 0) batches.emplace_back();
    Batch::value_type kv;
    kv.first.content = std::make_tuple(t, id, broker, volume, price);
    kv.second = delta;
    batches.back().push_back(kv);
    ++events;
  }
  std::fclose(in);

  dbtoaster::data_t program;
  program.on_system_ready_event();
  double checksum = 0.0;
  double wall0 = seconds(CLOCK_MONOTONIC), cpu0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
  for (const Batch& b : batches) {
    program.on_batch_update_BIDS(b);
    checksum += program.get_VWAP();
  }
  double cpu = seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0, wall = seconds(CLOCK_MONOTONIC) - wall0;
  std::printf("{\"events\": %ld, \"batches\": %zu, \"batch\": %ld, \"cpu_s\": %.9f, \"wall_s\": %.9f, "
              "\"vwap\": %.17g, \"checksum\": %.17g}\n",
              events, batches.size(), batch_size, cpu, wall, program.get_VWAP(), checksum);
  return 0;
}
