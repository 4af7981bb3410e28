// deploy/kubernetes: every manifest parses, and what the manifests tell
// memd, its probes and its clients agrees with the memd built here: its
// flags, its config parser and its version; the daemon, the probes and the
// example client then run with the manifests' own arguments.

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "daemon/config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/daemon_process.h"
#include "tests/support/run_program.h"
#include "tests/support/temp_dir.h"
#include "yaml-cpp/yaml.h"

namespace memd {
namespace {

namespace fs = std::filesystem;
using test::BinDir;
using ::testing::Contains;
using test::DaemonProcess;
using ::testing::HasSubstr;
using ::testing::IsSubsetOf;
using test::ProgramResult;
using test::RunProgram;
using test::TempDir;

const fs::path kManifestDir = fs::path(MEMD_SOURCE_DIR) / "deploy" / "kubernetes";

// What the memory limit must leave beyond the host and pinned pools, which
// are charged to memd's container: memd itself, gRPC, the CUDA driver.
constexpr std::uint64_t kMemoryHeadroom = std::uint64_t{1} << 30;

// ---- Reading YAML without yaml-cpp's pitfalls: indexing a missing key of a
// missing key throws, and assigning one Node to another rewrites the tree.

// The node at a dotted path of map keys ("spec.template.spec"), or nullopt.
std::optional<YAML::Node> At(const YAML::Node& root, absl::string_view path) {
  YAML::Node node;
  node.reset(root);
  for (absl::string_view key : absl::StrSplit(path, '.')) {
    if (!node.IsMap()) return std::nullopt;
    const YAML::Node& map = node;
    const YAML::Node next = map[std::string(key)];
    if (!next.IsDefined()) return std::nullopt;
    node.reset(next);
  }
  return node;
}

// The scalar at `path`, or "" when there is none.
std::string Text(const YAML::Node& root, absl::string_view path) {
  std::optional<YAML::Node> node = At(root, path);
  return node && node->IsScalar() ? node->Scalar() : "";
}

// The elements of the sequence at `path` (none when it is missing).
std::vector<YAML::Node> Items(const YAML::Node& root, absl::string_view path) {
  std::vector<YAML::Node> items;
  std::optional<YAML::Node> node = At(root, path);
  if (!node || !node->IsSequence()) return items;
  for (const YAML::Node& item : *node) items.push_back(item);
  return items;
}

// The scalars of the sequence at `path`.
std::vector<std::string> Strings(const YAML::Node& root, absl::string_view path) {
  std::vector<std::string> strings;
  for (const YAML::Node& item : Items(root, path)) {
    if (item.IsScalar()) strings.push_back(item.Scalar());
  }
  return strings;
}

// The string-to-string map at `path` (labels, selectors, data).
std::map<std::string, std::string> StringMap(const YAML::Node& root,
                                             absl::string_view path) {
  std::map<std::string, std::string> map;
  std::optional<YAML::Node> node = At(root, path);
  if (!node || !node->IsMap()) return map;
  for (const auto& entry : *node) {
    if (entry.second.IsScalar()) map[entry.first.Scalar()] = entry.second.Scalar();
  }
  return map;
}

// The element of `items` whose `name` is `name`.
std::optional<YAML::Node> Named(const std::vector<YAML::Node>& items,
                                absl::string_view name) {
  for (const YAML::Node& item : items) {
    if (Text(item, "name") == name) return item;
  }
  return std::nullopt;
}

bool IsSubMap(const std::map<std::string, std::string>& part,
              const std::map<std::string, std::string>& whole) {
  return std::all_of(part.begin(), part.end(), [&](const auto& entry) {
    auto found = whole.find(entry.first);
    return found != whole.end() && found->second == entry.second;
  });
}

std::string Basename(const std::string& path) {
  return fs::path(path).filename().string();
}

// ---- Pods.

// Init containers first, then containers: the order in which they run.
std::vector<YAML::Node> ContainersInOrder(const YAML::Node& pod_spec) {
  std::vector<YAML::Node> all = Items(pod_spec, "initContainers");
  for (const YAML::Node& container : Items(pod_spec, "containers")) {
    all.push_back(container);
  }
  return all;
}

// A container's argv: command then args.
std::vector<std::string> Argv(const YAML::Node& container) {
  std::vector<std::string> argv = Strings(container, "command");
  for (const std::string& arg : Strings(container, "args")) argv.push_back(arg);
  return argv;
}

std::map<std::string, std::string> Env(const YAML::Node& container) {
  std::map<std::string, std::string> env;
  for (const YAML::Node& variable : Items(container, "env")) {
    env[Text(variable, "name")] = Text(variable, "value");
  }
  return env;
}

// The value of `flag` in `argv` ("--flag VALUE" or "--flag=VALUE").
std::optional<std::string> FlagValue(const std::vector<std::string>& argv,
                                     const std::string& flag) {
  for (std::size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == flag && i + 1 < argv.size()) return argv[i + 1];
    if (absl::StartsWith(argv[i], flag + "=")) return argv[i].substr(flag.size() + 1);
  }
  return std::nullopt;
}

// `argv` with each flag of `values` given that value instead, or dropped
// (with its value) where the value is nullopt.
std::vector<std::string> WithFlags(
    const std::vector<std::string>& argv,
    const std::map<std::string, std::optional<std::string>>& values) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    std::string flag = argv[i].substr(0, argv[i].find('='));
    auto value = values.find(flag);
    if (value == values.end()) {
      out.push_back(argv[i]);
      continue;
    }
    if (flag == argv[i]) ++i;  // The value is the next word.
    if (value->second) out.insert(out.end(), {flag, *value->second});
  }
  return out;
}

struct Mount {
  YAML::Node volume;
  bool read_only = false;
};

// The pod volume that `container` mounts at `path`.
std::optional<Mount> MountAt(const YAML::Node& pod_spec, const YAML::Node& container,
                             const std::string& path) {
  for (const YAML::Node& mount : Items(container, "volumeMounts")) {
    if (Text(mount, "mountPath") != path) continue;
    std::optional<YAML::Node> volume =
        Named(Items(pod_spec, "volumes"), Text(mount, "name"));
    if (!volume) return std::nullopt;
    return Mount{*volume, Text(mount, "readOnly") == "true"};
  }
  return std::nullopt;
}

// A Kubernetes quantity ("12Gi", "512M", "1000") in bytes.
std::optional<std::uint64_t> ParseQuantity(const std::string& text) {
  static const std::vector<std::pair<std::string, std::uint64_t>> kSuffixes = {
      {"Ki", 1ull << 10},
      {"Mi", 1ull << 20},
      {"Gi", 1ull << 30},
      {"Ti", 1ull << 40},
      {"k", 1000ull},
      {"M", 1000ull * 1000},
      {"G", 1000ull * 1000 * 1000},
      {"T", 1000ull * 1000 * 1000 * 1000},
  };
  for (const auto& [suffix, factor] : kSuffixes) {
    if (!absl::EndsWith(text, suffix)) continue;
    std::uint64_t number;
    if (!absl::SimpleAtoi(text.substr(0, text.size() - suffix.size()), &number)) {
      return std::nullopt;
    }
    return number * factor;
  }
  std::uint64_t number;
  if (!absl::SimpleAtoi(text, &number)) return std::nullopt;
  return number;
}

// The port of a HOST:PORT address, or -1.
int PortOf(const std::string& address) {
  std::size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return -1;
  }
  return port;
}

std::string ProgramOutput(const ProgramResult& result) {
  return absl::StrCat("exit ", result.exit_code, " signal ", result.signal, "\nstdout:\n",
                      result.out, "\nstderr:\n", result.err);
}

// The project's version, as the built memd reports it ("memd 0.4.0").
std::string BuiltVersion() {
  ProgramResult result = RunProgram(BinDir() + "/memd", {"--version"});
  EXPECT_EQ(result.exit_code, 0) << ProgramOutput(result);
  std::string text = result.out + result.err;
  absl::string_view version = absl::StripAsciiWhitespace(text);
  EXPECT_TRUE(absl::ConsumePrefix(&version, "memd ")) << text;
  return std::string(version);
}

// The program named `name` on $PATH, or "".
std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

struct Resource {
  std::string file;  // Relative to deploy/kubernetes.
  YAML::Node node;
};

class KubernetesManifestsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::is_directory(kManifestDir)) << kManifestDir;
    for (const auto& entry : fs::recursive_directory_iterator(kManifestDir)) {
      const std::string extension = entry.path().extension().string();
      if (entry.is_regular_file() && (extension == ".yaml" || extension == ".yml")) {
        files_.push_back(fs::relative(entry.path(), kManifestDir).string());
      }
    }
    std::sort(files_.begin(), files_.end());
    for (const std::string& file : files_) {
      try {
        for (const YAML::Node& document :
             YAML::LoadAllFromFile((kManifestDir / file).string())) {
          if (!document.IsNull()) resources_.push_back({file, document});
        }
      } catch (const YAML::Exception& error) {
        ADD_FAILURE() << file << " does not parse: " << error.what();
      }
    }
  }

  // The one resource of `kind` (the manifests hold one of each kind they
  // use); a Null node and a failure otherwise.
  YAML::Node Only(absl::string_view kind) const {
    std::vector<const Resource*> found;
    for (const Resource& resource : resources_) {
      if (Text(resource.node, "kind") == kind) found.push_back(&resource);
    }
    if (found.size() != 1) {
      ADD_FAILURE() << "expected one " << kind << ", found " << found.size();
      return YAML::Node();
    }
    return found[0]->node;
  }

  YAML::Node DaemonPod() const {
    return At(Only("DaemonSet"), "spec.template.spec").value_or(YAML::Node());
  }

  YAML::Node DaemonContainer() const {
    std::optional<YAML::Node> container = Named(Items(DaemonPod(), "containers"), "memd");
    if (!container) {
      ADD_FAILURE() << "the DaemonSet has no container named memd";
      return YAML::Node();
    }
    return *container;
  }

  YAML::Node ClientPod() const { return At(Only("Pod"), "spec").value_or(YAML::Node()); }

  // memd.toml as the DaemonSet's memd reads it: the ConfigMap key behind
  // the --config path, through the volume mounted at that path's directory.
  std::string ConfigToml() const {
    const YAML::Node container = DaemonContainer();
    std::optional<std::string> path = FlagValue(Argv(container), "--config");
    if (!path) {
      ADD_FAILURE() << "memd gets no --config";
      return "";
    }
    const fs::path config_path(*path);
    std::optional<Mount> mount =
        MountAt(DaemonPod(), container, config_path.parent_path().string());
    if (!mount) {
      ADD_FAILURE() << "no volume is mounted at " << config_path.parent_path();
      return "";
    }
    const YAML::Node config_map = Only("ConfigMap");
    EXPECT_EQ(Text(mount->volume, "configMap.name"), Text(config_map, "metadata.name"))
        << "the volume at " << config_path.parent_path() << " is not the ConfigMap";
    EXPECT_FALSE(At(mount->volume, "configMap.items")) << "items would rename keys";
    std::map<std::string, std::string> data = StringMap(config_map, "data");
    auto toml = data.find(config_path.filename().string());
    if (toml == data.end()) {
      ADD_FAILURE() << "the ConfigMap has no key " << config_path.filename();
      return "";
    }
    return toml->second;
  }

  // The ConfigMap's memd.toml parsed by the daemon's own parser, as
  // `memd --config FILE` would; nullopt (and a failure) when it refuses it.
  std::optional<Config> ParsedConfig() const {
    TempDir dir;
    const std::string path = dir.Join("memd.toml");
    std::ofstream(path) << ConfigToml();
    const char* argv[] = {"memd", "--config", path.c_str()};
    absl::StatusOr<Config> config = ParseConfig(3, argv);
    EXPECT_TRUE(config.ok()) << config.status();
    if (!config.ok()) return std::nullopt;
    return *config;
  }

  std::vector<std::string> files_;
  std::vector<Resource> resources_;
};

TEST_F(KubernetesManifestsTest, EveryFileParsesAndEveryResourceIsNamed) {
  std::set<std::string> files_with_resources;
  std::set<std::string> kinds;
  for (const Resource& resource : resources_) {
    files_with_resources.insert(resource.file);
    ASSERT_TRUE(resource.node.IsMap()) << resource.file;
    const std::string kind = Text(resource.node, "kind");
    kinds.insert(kind);
    EXPECT_NE(Text(resource.node, "apiVersion"), "") << resource.file;
    EXPECT_NE(kind, "") << resource.file;
    if (kind != "Kustomization") {
      EXPECT_NE(Text(resource.node, "metadata.name"), "") << resource.file;
    }
  }
  EXPECT_EQ(files_with_resources, std::set<std::string>(files_.begin(), files_.end()))
      << "a file without a resource";
  EXPECT_THAT((std::set<std::string>{"Namespace", "ConfigMap", "DaemonSet", "Service",
                                     "ServiceMonitor", "Pod", "Kustomization"}),
              IsSubsetOf(kinds));
}

TEST_F(KubernetesManifestsTest, KustomizationListsExactlyTheManifestsBesideIt) {
  ASSERT_TRUE(fs::exists(kManifestDir / "kustomization.yaml"));
  for (const Resource& kustomization : resources_) {
    if (Text(kustomization.node, "kind") != "Kustomization") continue;
    const fs::path dir = fs::path(kustomization.file).parent_path();
    std::vector<std::string> listed = Strings(kustomization.node, "resources");
    for (const std::string& resource : listed) {
      EXPECT_TRUE(fs::is_regular_file(kManifestDir / dir / resource))
          << kustomization.file << " lists " << resource << ", which is no file";
    }
    std::vector<std::string> beside;
    for (const std::string& file : files_) {
      if (fs::path(file).parent_path() == dir &&
          fs::path(file).filename() != "kustomization.yaml") {
        beside.push_back(fs::path(file).filename().string());
      }
    }
    std::sort(listed.begin(), listed.end());
    EXPECT_EQ(listed, beside) << kustomization.file;
  }
}

TEST_F(KubernetesManifestsTest, KustomizedResourcesLiveInTheNamespaceItCreates) {
  const std::string name_space = Text(Only("Namespace"), "metadata.name");
  for (const Resource& resource : resources_) {
    const std::string kind = Text(resource.node, "kind");
    if (kind == "Namespace" || kind == "Kustomization" ||
        absl::StartsWith(resource.file, "examples/")) {
      continue;
    }
    EXPECT_EQ(Text(resource.node, "metadata.namespace"), name_space) << resource.file;
  }
}

TEST_F(KubernetesManifestsTest, KubectlKustomizeBuildsTheListedResources) {
  const std::string kubectl = FindOnPath("kubectl");
  if (kubectl.empty()) {
    GTEST_SKIP() << "no kubectl on PATH (Debian 12 does not package it); "
                    "KustomizationListsExactlyTheManifestsBesideIt checks the list without it";
  }
  ProgramResult result = RunProgram(kubectl, {"kustomize", kManifestDir.string()});
  ASSERT_EQ(result.exit_code, 0) << ProgramOutput(result);
  std::multiset<std::string> built;
  for (const YAML::Node& document : YAML::LoadAll(result.out)) {
    built.insert(Text(document, "kind") + "/" + Text(document, "metadata.name"));
  }
  std::multiset<std::string> expected;
  for (const Resource& resource : resources_) {
    if (fs::path(resource.file).parent_path().empty() &&
        Text(resource.node, "kind") != "Kustomization") {
      expected.insert(Text(resource.node, "kind") + "/" +
                      Text(resource.node, "metadata.name"));
    }
  }
  EXPECT_EQ(built, expected);
}

TEST_F(KubernetesManifestsTest, MemdGetsOnlyFlagsTheBuiltMemdHas) {
  ProgramResult help = RunProgram(BinDir() + "/memd", {"--help"});
  ASSERT_EQ(help.exit_code, 0) << ProgramOutput(help);
  std::set<std::string> known;
  for (absl::string_view word : absl::StrSplit(
           help.out + help.err, absl::ByAnyChar(" \t\n,"), absl::SkipEmpty())) {
    if (absl::StartsWith(word, "--")) known.insert(std::string(word));
  }
  ASSERT_THAT(known, Contains("--config"));

  std::vector<std::string> argv = Argv(DaemonContainer());
  ASSERT_FALSE(argv.empty()) << "the memd container needs a command";
  EXPECT_EQ(Basename(argv[0]), "memd");
  for (std::size_t i = 1; i < argv.size(); ++i) {
    if (!absl::StartsWith(argv[i], "--")) continue;
    EXPECT_THAT(known, Contains(argv[i].substr(0, argv[i].find('='))));
  }
}

TEST_F(KubernetesManifestsTest, ConfigMapIsAcceptedByTheDaemonsParser) {
  std::optional<Config> config = ParsedConfig();
  ASSERT_TRUE(config);
  EXPECT_NE(config->socket_dir, "");
  // The Service, Prometheus and the kubelet connect from outside the pod.
  const std::string host =
      config->metrics_address.substr(0, config->metrics_address.rfind(':'));
  EXPECT_THAT(host, ::testing::AnyOf("0.0.0.0", "[::]"));
}

TEST_F(KubernetesManifestsTest, MemoryLimitHoldsTheHostAndPinnedPools) {
  std::optional<Config> config = ParsedConfig();
  ASSERT_TRUE(config);
  // 0 would mean a share of the node's RAM, far beyond the pod's limit.
  ASSERT_GT(config->host_pool_limit_bytes, 0u);
  ASSERT_GT(config->pinned_pool_limit_bytes, 0u);
  const std::string limit = Text(DaemonContainer(), "resources.limits.memory");
  std::optional<std::uint64_t> bytes = ParseQuantity(limit);
  ASSERT_TRUE(bytes) << "memory limit '" << limit << "'";
  EXPECT_GE(*bytes, config->host_pool_limit_bytes + config->pinned_pool_limit_bytes +
                        kMemoryHeadroom);
}

TEST_F(KubernetesManifestsTest, MetricsPortAgreesFromConfigToServiceMonitor) {
  std::optional<Config> config = ParsedConfig();
  ASSERT_TRUE(config);
  const int port = PortOf(config->metrics_address);
  ASSERT_GT(port, 0);
  std::optional<YAML::Node> container_port =
      Named(Items(DaemonContainer(), "ports"), "metrics");
  ASSERT_TRUE(container_port) << "no container port named metrics";
  EXPECT_EQ(Text(*container_port, "containerPort"), absl::StrCat(port));

  // Service ports that reach memd's metrics, by the port's name or number.
  std::set<std::string> metrics_ports;
  for (const YAML::Node& service_port : Items(Only("Service"), "spec.ports")) {
    const std::string target = Text(service_port, "targetPort");
    EXPECT_THAT(target, ::testing::AnyOf("metrics", absl::StrCat(port)))
        << "Service port " << Text(service_port, "name");
    metrics_ports.insert(Text(service_port, "name"));
  }
  ASSERT_FALSE(metrics_ports.empty());
  const std::vector<YAML::Node> endpoints =
      Items(Only("ServiceMonitor"), "spec.endpoints");
  ASSERT_FALSE(endpoints.empty());
  for (const YAML::Node& endpoint : endpoints) {
    EXPECT_THAT(metrics_ports, Contains(Text(endpoint, "port")));
    const std::string path = Text(endpoint, "path");
    EXPECT_TRUE(path.empty() || path == "/metrics") << path;
  }
}

TEST_F(KubernetesManifestsTest, SocketDirAgreesFromConfigToClients) {
  std::optional<Config> config = ParsedConfig();
  ASSERT_TRUE(config);
  const std::string socket_dir = config->socket_dir;
  ASSERT_NE(socket_dir, "");
  std::optional<Mount> daemon_mount = MountAt(DaemonPod(), DaemonContainer(), socket_dir);
  ASSERT_TRUE(daemon_mount) << "memd mounts nothing at " << socket_dir;
  const std::string host_path = Text(daemon_mount->volume, "hostPath.path");
  // The same directory as memd's default on the node: memctl there finds it.
  EXPECT_EQ(host_path, socket_dir);
  EXPECT_EQ(Text(daemon_mount->volume, "hostPath.type"), "DirectoryOrCreate");
  EXPECT_FALSE(daemon_mount->read_only);

  const std::vector<YAML::Node> clients = ContainersInOrder(ClientPod());
  ASSERT_FALSE(clients.empty());
  for (const YAML::Node& client : clients) {
    SCOPED_TRACE(Text(client, "name"));
    const std::string client_dir = Env(client)["MEMD_SOCKET_DIR"];
    EXPECT_EQ(client_dir, socket_dir);
    std::optional<Mount> mount = MountAt(ClientPod(), client, client_dir);
    ASSERT_TRUE(mount) << "the client mounts nothing at " << client_dir;
    EXPECT_EQ(Text(mount->volume, "hostPath.path"), host_path);
    // Enough to connect; a writable mount would let a client replace memd's
    // sockets with its own.
    EXPECT_TRUE(mount->read_only);
  }
}

TEST_F(KubernetesManifestsTest, ProbesAskTheDaemonWhereItListens) {
  std::optional<Config> config = ParsedConfig();
  ASSERT_TRUE(config);
  const YAML::Node container = DaemonContainer();
  int probes = 0;
  for (const char* kind : {"startupProbe", "readinessProbe", "livenessProbe"}) {
    std::optional<YAML::Node> probe = At(container, kind);
    if (!probe) continue;
    SCOPED_TRACE(kind);
    ++probes;
    if (At(*probe, "exec")) {
      std::vector<std::string> command = Strings(*probe, "exec.command");
      ASSERT_FALSE(command.empty());
      EXPECT_EQ(Basename(command[0]), "memctl");
      EXPECT_EQ(FlagValue(command, "--socket-dir"), config->socket_dir);
      EXPECT_THAT(command, Contains("ping"));
    } else if (At(*probe, "httpGet")) {
      EXPECT_THAT(
          Text(*probe, "httpGet.port"),
          ::testing::AnyOf("metrics", absl::StrCat(PortOf(config->metrics_address))));
      EXPECT_EQ(Text(*probe, "httpGet.path"), "/metrics");
    } else {
      ADD_FAILURE() << "neither memctl nor /metrics";
    }
  }
  EXPECT_GE(probes, 2) << "readiness and liveness at least";
  EXPECT_TRUE(At(container, "readinessProbe"));
  EXPECT_TRUE(At(container, "livenessProbe"));
}

TEST_F(KubernetesManifestsTest, ClientsJoinTheGroupTheSocketsBelongTo) {
  std::optional<Config> config = ParsedConfig();
  ASSERT_TRUE(config);
  EXPECT_EQ(config->socket_mode & 0060, 0060u) << "the group may not connect";
  const std::string group = Text(DaemonPod(), "securityContext.runAsGroup");
  ASSERT_NE(group, "") << "memd's group decides who may connect";
  std::vector<std::string> client_groups =
      Strings(ClientPod(), "securityContext.supplementalGroups");
  client_groups.push_back(Text(ClientPod(), "securityContext.runAsGroup"));
  EXPECT_THAT(client_groups, Contains(group));
}

// A container's securityContext: not privileged, a read-only root, every
// capability dropped but `capability` at most.
void ExpectConfined(const YAML::Node& context, const std::string& capability) {
  EXPECT_NE(Text(context, "privileged"), "true");
  EXPECT_EQ(Text(context, "readOnlyRootFilesystem"), "true");
  EXPECT_THAT(Strings(context, "capabilities.drop"), Contains("ALL"));
  EXPECT_THAT(Strings(context, "capabilities.add"),
              IsSubsetOf(std::vector<std::string>{capability}));
}

TEST_F(KubernetesManifestsTest, DaemonRunsAsItsOwnUserWithoutPrivileges) {
  const YAML::Node pod = DaemonPod();
  for (const char* shared : {"hostPID", "hostIPC", "hostNetwork"}) {
    EXPECT_NE(Text(pod, shared), "true") << shared;
  }
  const std::string user = Text(pod, "securityContext.runAsUser");
  const std::string group = Text(pod, "securityContext.runAsGroup");
  EXPECT_THAT(user, ::testing::Not(::testing::AnyOf("", "0"))) << "memd runs as root";
  EXPECT_EQ(Text(pod, "securityContext.runAsNonRoot"), "true");
  const YAML::Node context =
      At(DaemonContainer(), "securityContext").value_or(YAML::Node());
  EXPECT_NE(Text(context, "runAsUser"), "0");
  // allowPrivilegeEscalation stays true: the file capability that gives
  // memd IPC_LOCK needs it (image_test runs memd both ways).
  ExpectConfined(context, "IPC_LOCK");

  // Root runs only to give memd the socket directory the kubelet made:
  // chown, with CHOWN and nothing else, of what memd mounts there.
  std::optional<Config> config = ParsedConfig();
  ASSERT_TRUE(config);
  std::optional<Mount> memd_mount = MountAt(pod, DaemonContainer(), config->socket_dir);
  ASSERT_TRUE(memd_mount);
  for (const YAML::Node& init : Items(pod, "initContainers")) {
    SCOPED_TRACE(Text(init, "name"));
    const YAML::Node init_context = At(init, "securityContext").value_or(YAML::Node());
    EXPECT_EQ(Text(init_context, "allowPrivilegeEscalation"), "false");
    ExpectConfined(init_context, "CHOWN");
    const std::vector<std::string> argv = Argv(init);
    ASSERT_FALSE(argv.empty());
    EXPECT_EQ(argv.front(), "chown");
    EXPECT_THAT(argv, Contains(absl::StrCat(user, ":", group)));
    EXPECT_EQ(argv.back(), config->socket_dir);
    std::optional<Mount> mount = MountAt(pod, init, config->socket_dir);
    ASSERT_TRUE(mount) << "the init container mounts nothing at " << config->socket_dir;
    EXPECT_EQ(Text(mount->volume, "name"), Text(memd_mount->volume, "name"));
  }
  EXPECT_EQ(Items(pod, "initContainers").size(), 1u)
      << "memd's user owns the socket directory only if the init container gives it";
}

TEST_F(KubernetesManifestsTest, SelectorsConnectDaemonSetServiceAndServiceMonitor) {
  const YAML::Node daemon_set = Only("DaemonSet");
  const YAML::Node service = Only("Service");
  const YAML::Node monitor = Only("ServiceMonitor");
  const auto pod_labels = StringMap(daemon_set, "spec.template.metadata.labels");
  const auto daemon_selector = StringMap(daemon_set, "spec.selector.matchLabels");
  ASSERT_FALSE(daemon_selector.empty());
  EXPECT_TRUE(IsSubMap(daemon_selector, pod_labels));
  const auto service_selector = StringMap(service, "spec.selector");
  ASSERT_FALSE(service_selector.empty());
  EXPECT_TRUE(IsSubMap(service_selector, pod_labels));
  EXPECT_EQ(Text(service, "spec.clusterIP"), "None") << "one endpoint per node";
  const auto monitor_selector = StringMap(monitor, "spec.selector.matchLabels");
  ASSERT_FALSE(monitor_selector.empty());
  EXPECT_TRUE(IsSubMap(monitor_selector, StringMap(service, "metadata.labels")));
  EXPECT_THAT(Strings(monitor, "spec.namespaceSelector.matchNames"),
              Contains(Text(service, "metadata.namespace")));
}

TEST_F(KubernetesManifestsTest, ImagesAndVersionLabelsAreTheBuiltVersion) {
  const std::string version = BuiltVersion();
  ASSERT_NE(version, "");
  std::vector<YAML::Node> containers = ContainersInOrder(DaemonPod());
  for (const YAML::Node& container : ContainersInOrder(ClientPod())) {
    containers.push_back(container);
  }
  for (const YAML::Node& container : containers) {
    const std::string image = Text(container, "image");
    EXPECT_TRUE(absl::EndsWith(image, ":" + version))
        << Text(container, "name") << ": " << image;
  }
  for (const Resource& resource : resources_) {
    const auto labels = StringMap(resource.node, "metadata.labels");
    auto label = labels.find("app.kubernetes.io/version");
    if (label != labels.end()) {
      EXPECT_EQ(label->second, version) << resource.file;
    }
  }
}

// The real memd started with the DaemonSet's arguments and the ConfigMap
// (only the socket directory and metrics address moved to private ones):
// it must reach READY, the probes' commands must succeed against it, and the
// example client's containers must run to success in their order.
TEST_F(KubernetesManifestsTest, DaemonProbesAndClientRunAsTheManifestsSay) {
  std::optional<Config> config = ParsedConfig();
  ASSERT_TRUE(config);
  TempDir dir;
  const std::string config_path = dir.Join("memd.toml");
  std::ofstream(config_path) << ConfigToml();

  const YAML::Node container = DaemonContainer();
  std::vector<std::string> argv = Argv(container);
  ASSERT_FALSE(argv.empty());
  argv.erase(argv.begin());
  // DaemonProcess supplies a private socket directory and metrics port,
  // which win over the file as flags do.
  argv = WithFlags(argv, {{"--config", config_path},
                          {"--socket-dir", std::nullopt},
                          {"--metrics-address", std::nullopt}});
  auto daemon = DaemonProcess::Start(argv);
  ASSERT_TRUE(daemon.ok()) << daemon.status();

  for (const char* kind : {"startupProbe", "readinessProbe", "livenessProbe"}) {
    std::vector<std::string> command =
        Strings(container, absl::StrCat(kind, ".exec.command"));
    if (command.empty()) continue;
    SCOPED_TRACE(kind);
    const std::string program = BinDir() + "/" + Basename(command[0]);
    command.erase(command.begin());
    ProgramResult result = RunProgram(
        program, WithFlags(command, {{"--socket-dir", (*daemon)->socket_dir()}}));
    EXPECT_EQ(result.exit_code, 0) << ProgramOutput(result) << (*daemon)->Log();
  }

  std::string producer_text;
  for (const YAML::Node& client : ContainersInOrder(ClientPod())) {
    SCOPED_TRACE(Text(client, "name"));
    std::vector<std::string> client_argv = Argv(client);
    ASSERT_FALSE(client_argv.empty());
    const std::string program = Basename(client_argv[0]);
    client_argv.erase(client_argv.begin());
    std::map<std::string, std::string> env = Env(client);
    ASSERT_EQ(env["MEMD_SOCKET_DIR"], config->socket_dir);
    env["MEMD_SOCKET_DIR"] = (*daemon)->socket_dir();
    ProgramResult result = RunProgram(BinDir() + "/" + program, client_argv, "", env);
    EXPECT_EQ(result.exit_code, 0) << ProgramOutput(result) << (*daemon)->Log();
    if (program == "memd-example-producer" && !client_argv.empty()) {
      producer_text = client_argv.back();
    }
    if (program == "memd-example-consumer" && !producer_text.empty()) {
      EXPECT_THAT(result.out, HasSubstr(producer_text));
    }
  }
}

}  // namespace
}  // namespace memd
