// Atomic file writes in batches, for kvtier's fs block store
// (storage-adapters/fs-blob-store.ts, installed by src/kvtier/fs-batch-writer.ts).
// A block put through node:fs is four libuv pool hops (open, write, close,
// rename), each a main-thread dispatch and a thread wake-up; on a loaded
// 2-core box the hand-offs cost more than the syscalls. Here one pool job
// does a whole batch: per file, open the temp name O_EXCL (on ENOENT, make the
// two shard directories above it and open again), write all, optional
// fdatasync, close, rename over the final name, optional fsync of the
// directory.
//
//   writeFilesAtomic(finals: string[], temps: string[], datas: Uint8Array[],
//                    fsync: boolean) → Promise<Int32Array>
//   One errno per file, 0 = written and renamed into place. A file that
//   failed leaves no temp file behind (unlinked) and its final name as it
//   was; the caller retries or reports it (the JS put path owns the error
//   mapping and the retry rules, e.g. a recycled temp name).
//   The datas stay referenced until the promise settles; the caller must not
//   change them meanwhile.
// Reference: test/storage-adapters/fs-batch-writer.test.ts (the bytes read back,
// no temp files left, errno for a missing directory and an existing temp name).
#include <errno.h>
#include <fcntl.h>
#include <napi.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "napi-args.h"

namespace kvt {
namespace {

constexpr size_t MAX_FILES_PER_CALL = 4096;

struct FileJob {
  std::string final_path;
  std::string temp_path;
  const uint8_t* data;
  size_t len;
};

int sync_dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int fd = open(dir.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const int rc = fsync(fd) == 0 ? 0 : errno;
  close(fd);
  return rc;
}

std::string parent_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos || slash == 0 ? std::string() : path.substr(0, slash);
}

// The two shard levels above a block (<dir>/s0/s1/key), made on first use; EEXIST is someone else's (or our own earlier) mkdir.
void make_shard_dirs(const std::string& temp_path) {
  const std::string shard1 = parent_of(temp_path);
  const std::string shard0 = parent_of(shard1);
  if (!shard0.empty() && mkdir(shard0.c_str(), 0777) != 0 && errno != EEXIST) return;
  if (!shard1.empty()) mkdir(shard1.c_str(), 0777);
}

// 0, or the errno of the step that failed (the temp file removed).
int write_one(const FileJob& job, bool sync) {
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC;
  int fd = open(job.temp_path.c_str(), flags, 0666);
  if (fd < 0 && errno == ENOENT) {
    make_shard_dirs(job.temp_path);
    fd = open(job.temp_path.c_str(), flags, 0666);
  }
  if (fd < 0) return errno;
  int failure = 0;
  size_t done = 0;
  while (done < job.len) {
    const ssize_t n = write(fd, job.data + done, job.len - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      failure = errno;
      break;
    }
    done += (size_t)n;
  }
  if (failure == 0 && sync && fdatasync(fd) != 0) failure = errno;
  // A close error counts: NFS-like mounts report deferred write errors there.
  if (close(fd) != 0 && failure == 0) failure = errno;
  if (failure == 0 && rename(job.temp_path.c_str(), job.final_path.c_str()) != 0) failure = errno;
  if (failure != 0) {
    unlink(job.temp_path.c_str());
    return failure;
  }
  return sync ? sync_dir_of(job.final_path) : 0;
}

class WriteFilesWorker : public Napi::AsyncWorker {
 public:
  WriteFilesWorker(Napi::Env env, Napi::Array datas, std::vector<FileJob> jobs, bool sync)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), datas_ref_(Napi::Persistent(datas.As<Napi::Object>())), jobs_(std::move(jobs)), sync_(sync), errnos_(jobs_.size(), 0) {}

  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    for (size_t i = 0; i < jobs_.size(); i++) errnos_[i] = write_one(jobs_[i], sync_);
  }

  void OnOK() override {
    Napi::Int32Array out = Napi::Int32Array::New(Env(), errnos_.size());
    for (size_t i = 0; i < errnos_.size(); i++) out[i] = errnos_[i];
    deferred_.Resolve(out);
  }

  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  Napi::ObjectReference datas_ref_;  // keeps every buffer alive while the pool thread writes it
  std::vector<FileJob> jobs_;
  bool sync_;
  std::vector<int32_t> errnos_;
};

Napi::Value WriteFilesAtomic(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* usage = "writeFilesAtomic(finals: string[], temps: string[], datas: Uint8Array[], fsync: boolean): arrays of one length, 1..4096";
  if (info.Length() != 4u || !info[0].IsArray() || !info[1].IsArray() || !info[2].IsArray() || !info[3].IsBoolean()) {
    throw_code(env, "KVT_ERR_NATIVE_ARG", usage);
    return env.Undefined();
  }
  Napi::Array finals = info[0].As<Napi::Array>(), temps = info[1].As<Napi::Array>(), datas = info[2].As<Napi::Array>();
  const uint32_t count = finals.Length();
  if (count == 0 || count > MAX_FILES_PER_CALL || temps.Length() != count || datas.Length() != count) {
    throw_code(env, "KVT_ERR_NATIVE_ARG", usage);
    return env.Undefined();
  }
  std::vector<FileJob> jobs;
  jobs.reserve(count);
  for (uint32_t i = 0; i < count; i++) {
    Napi::Value f = finals[i], t = temps[i], d = datas[i];
    uint8_t* p = nullptr;
    size_t n = 0;
    if (!f.IsString() || !t.IsString() || !typed_bytes(d, &p, &n, napi_uint8_array)) {
      throw_code(env, "KVT_ERR_NATIVE_ARG", std::string(usage) + " (entry " + std::to_string(i) + ")");
      return env.Undefined();
    }
    jobs.push_back(FileJob{f.As<Napi::String>().Utf8Value(), t.As<Napi::String>().Utf8Value(), p, n});
  }
  auto* worker = new WriteFilesWorker(env, datas, std::move(jobs), info[3].As<Napi::Boolean>().Value());
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

}  // namespace

void register_fs_batch(Napi::Env env, Napi::Object exports) { exports.Set("writeFilesAtomic", Napi::Function::New(env, WriteFilesAtomic)); }

}  // namespace kvt
