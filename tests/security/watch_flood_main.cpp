// temper_watch_flood: many `temper watch` clients at once, in one process, for the attack tests
// (daemon_attacks_test.cpp) and the load bench. Each stream has its own connection, as separate
// `temper watch` processes would, and follows the journal from its end.
//
//   temper_watch_flood SOCKET STREAMS [BATCH]
//
// Once every stream was answered (temperd's initial metadata, or a status) or 20 s passed, prints
//   accepted A refused R pending P first_refusal CODE MESSAGE
// (CODE -1 and MESSAGE "-" when none was refused), then keeps the accepted streams open, reading
// their events and printing `events E` (the total so far) whenever it grows, until stdin closes;
// then cancels them, prints `events E` once more and exits 0. It runs as whoever starts it: the tests start it as a
// member of the socket's group.
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "temper/v1/temper.grpc.pb.h"

namespace {

using namespace std::chrono_literals;

enum Op : uintptr_t { kStart = 0, kMetadata = 1, kRead = 2, kFinish = 3 };

struct Stream {
  std::unique_ptr<temper::v1::Temper::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientAsyncReader<temper::v1::JournalEvent>> reader;
  temper::v1::JournalEvent event;
  grpc::Status status;
  bool answered = false;  // initial metadata or a status came
  bool finished = false;
  bool reading = false;
};

void* Tag(size_t stream, Op op) { return reinterpret_cast<void*>(stream * 4 + op); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: temper_watch_flood SOCKET STREAMS [BATCH]\n");
    return 2;
  }
  const std::string socket = argv[1];
  const size_t count = std::strtoul(argv[2], nullptr, 10);
  const std::string batch = argc > 3 ? argv[3] : "";
  // One descriptor per connection, and gRPC's own.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }

  grpc::CompletionQueue queue;
  std::vector<std::unique_ptr<Stream>> streams;
  size_t outstanding = 0;  // operations whose tags have not come back yet
  for (size_t i = 0; i < count; ++i) {
    auto s = std::make_unique<Stream>();
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own, as a process would have
    s->stub = temper::v1::Temper::NewStub(
        grpc::CreateCustomChannel("unix:" + socket, grpc::InsecureChannelCredentials(), args));
    temper::v1::WatchJournalRequest request;
    request.set_follow(true);
    request.set_batch_id(batch);
    s->reader = s->stub->PrepareAsyncWatchJournal(&s->context, request, &queue);
    s->reader->StartCall(Tag(i, kStart));
    s->reader->ReadInitialMetadata(Tag(i, kMetadata));
    s->reader->Finish(&s->status, Tag(i, kFinish));
    outstanding += 3;
    streams.push_back(std::move(s));
  }

  size_t answered = 0;
  uint64_t events = 0;
  // Handles one tag; false once the queue is shut down.
  auto next = [&](std::chrono::system_clock::time_point deadline) {
    void* tag = nullptr;
    bool ok = false;
    grpc::CompletionQueue::NextStatus got = queue.AsyncNext(&tag, &ok, deadline);
    if (got != grpc::CompletionQueue::GOT_EVENT) return got != grpc::CompletionQueue::SHUTDOWN;
    --outstanding;
    const size_t i = reinterpret_cast<uintptr_t>(tag) / 4;
    Stream& s = *streams[i];
    switch (static_cast<Op>(reinterpret_cast<uintptr_t>(tag) % 4)) {
      case kStart:
        break;
      case kMetadata:
        if (!s.answered) ++answered;
        s.answered = true;
        if (ok && !s.finished) {
          s.reading = true;
          s.reader->Read(&s.event, Tag(i, kRead));
          ++outstanding;
        }
        break;
      case kRead:
        s.reading = ok;
        if (ok) {
          ++events;
          s.reader->Read(&s.event, Tag(i, kRead));
          ++outstanding;
        }
        break;
      case kFinish:
        if (!s.answered) ++answered;
        s.answered = true;
        s.finished = true;
        break;
    }
    return true;
  };

  const auto give_up = std::chrono::system_clock::now() + 20s;
  while (answered < count && std::chrono::system_clock::now() < give_up) next(give_up);
  // A refused stream's status may come just after its (empty) metadata: let those arrive.
  const auto settle = std::chrono::system_clock::now() + 500ms;
  while (std::chrono::system_clock::now() < settle) next(settle);

  size_t accepted = 0, refused = 0, pending = 0;
  const Stream* first_refused = nullptr;
  for (const auto& s : streams) {
    if (!s->answered) {
      ++pending;
    } else if (s->finished && !s->status.ok()) {
      ++refused;
      if (first_refused == nullptr) first_refused = s.get();
    } else if (!s->finished) {
      ++accepted;
    }
  }
  std::printf("accepted %zu refused %zu pending %zu first_refusal %d %s\n", accepted, refused, pending,
              first_refused ? static_cast<int>(first_refused->status.error_code()) : -1,
              first_refused ? first_refused->status.error_message().c_str() : "-");
  std::fflush(stdout);

  // Serve events until the caller closes stdin.
  std::atomic<bool> stdin_closed = false;
  std::thread stdin_watch([&stdin_closed] {
    char buf[256];
    while (read(0, buf, sizeof buf) > 0) {
    }
    stdin_closed = true;
  });
  uint64_t reported = 0;
  while (!stdin_closed) {
    next(std::chrono::system_clock::now() + 100ms);
    if (events != reported) {
      reported = events;
      std::printf("events %llu\n", static_cast<unsigned long long>(events));
      std::fflush(stdout);
    }
  }
  stdin_watch.join();
  for (auto& s : streams) s->context.TryCancel();
  while (outstanding > 0) next(std::chrono::system_clock::now() + 1s);
  queue.Shutdown();
  while (next(std::chrono::system_clock::now() + 1s)) {
  }
  std::printf("events %llu\n", static_cast<unsigned long long>(events));
  return 0;
}
