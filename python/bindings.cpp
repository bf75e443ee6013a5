// The Python binding (module exdyna._exdyna): the C++ sparsifiers, with error feedback, stepping
// over a torch.distributed process group that the user already has. The pure-Python package
// (python/exdyna: Sparsifier, ddp.State, ddp.hook) wraps this module; nothing here re-implements
// an algorithm.
//
// The process group arrives as the Python object torch.distributed hands out. torch binds
// c10d::ProcessGroup with pybind11 (torch._C._distributed_c10d); when this module shares torch's
// pybind11 internals (the same pybind11 headers and ABI tag: Debian's torch 1.13 with pybind11
// 2.10, "__pybind11_internals_v4_gcc_libstdcpp_cxxabi1017__"; a torch 2.x wheel with the pybind11
// 3 it ships in its include/), pybind11 finds torch's type record and casts the object to
// c10d::ProcessGroup* directly; the communicator then holds its own reference
// (intrusive_ptr::reclaim_copy). CMake compiles against torch's pybind11 and checks that the
// interpreter's torch and the libtorch we link are the same version; the import checks that
// torch's ProcessGroup type is visible here (require_process_group_type), so a mismatch fails at
// import with the reason rather than at the first step.
//
// Errors: exdyna::InvalidArgument and DataError -> ValueError, TimeoutError -> TimeoutError, other
// exdyna errors and c10 errors -> RuntimeError; a gradient that is not float32 -> TypeError. The
// collectives run with the GIL released.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "exdyna/comm/engines/process_group_communicator.hpp"
#include "exdyna/core/byte_io.hpp"
#include "exdyna/sparsifiers/device_error_feedback.hpp"
#include "exdyna/sparsifiers/device_error_feedback_testing.hpp"  // the GPU benchmarks' kernels
#include "exdyna/sparsifiers/exdyna/exdyna.hpp"
#include "exdyna/sparsifiers/factory.hpp"
#include "exdyna/sparsifiers/option_table.hpp"
#include "exdyna/sparsifiers/step_stats_fields.hpp"

namespace py = pybind11;

namespace exdyna::python {

namespace {

using sparsifiers::SparsifierConfig;

// Python-side options: the option table's keywords (sparsifiers/option_table.hpp, the CLI's flags
// in Python spelling: --min-blk -> min_blk) and the binding's own three, measure_global_error,
// resident and timeout. Defaults are the library's: the exact controller and balance and the
// automatic worker cap, which hold the density at d on real gradients.
struct Options {
  SparsifierConfig config;
  sparsifiers::ErrorFeedbackOptions ef;
  std::chrono::milliseconds timeout{300'000};
  bool global_error_given = false;  // measure_global_error was passed
};

std::string shown(py::handle v) {
  return py::str(py::repr(v));
}

// A keyword's value as the text the option table reads, once its Python type is the one the
// option takes (a bool is not a number, a float not an integer).
std::string option_text(const sparsifiers::OptionSpec& o, const std::string& name, py::handle v) {
  const bool is_bool = py::isinstance<py::bool_>(v);
  const bool is_int = !is_bool && py::isinstance<py::int_>(v);
  const bool is_number = is_int || (!is_bool && py::isinstance<py::float_>(v));
  const bool is_str = py::isinstance<py::str>(v);
  bool ok = false;
  switch (o.kind) {
    case sparsifiers::OptionKind::kInteger:
      ok = is_int;
      break;
    case sparsifiers::OptionKind::kNumber:
      ok = is_number;
      break;
    case sparsifiers::OptionKind::kChoice:
      ok = is_str;
      break;
    case sparsifiers::OptionKind::kCap:
      ok = is_str || is_number;
      break;
  }
  EXDYNA_CHECK_ARG(ok, "option ", name, "=", shown(v), " is not valid; expected ", o.values);
  return is_str ? v.cast<std::string>() : py::str(v).cast<std::string>();
}

// The binding's own options: they configure error feedback and the collectives, not a sparsifier.
constexpr const char* kSessionOptions[] = {"measure_global_error", "resident", "timeout"};

bool set_session_option(Options& o, const std::string& name, py::handle v) {
  if (name == "measure_global_error" || name == "resident") {
    EXDYNA_CHECK_ARG(py::isinstance<py::bool_>(v), "option ", name, "=", shown(v),
                     " is not valid; expected True or False");
    (name == "resident" ? o.ef.resident : o.ef.measure_global_error) = v.cast<bool>();
    o.global_error_given = o.global_error_given || name == "measure_global_error";
    return true;
  }
  if (name == "timeout") {
    const bool ok = !py::isinstance<py::bool_>(v) &&
                    (py::isinstance<py::float_>(v) || py::isinstance<py::int_>(v));
    const double s = ok ? v.cast<double>() : 0;
    EXDYNA_CHECK_ARG(ok && s > 0 && s < 1e7, "option ", name, "=", shown(v),
                     " is not valid; expected seconds > 0");
    o.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(s * 1000));
    return true;
  }
  return false;
}

// Every keyword, sorted.
std::vector<std::string> option_names() {
  std::vector<std::string> v(std::begin(kSessionOptions), std::end(kSessionOptions));
  for (const auto& o : sparsifiers::option_table()) v.emplace_back(o.key);
  std::sort(v.begin(), v.end());
  return v;
}

// resident=True: what the resident step runs without (ErrorFeedbackOptions::resident) is refused
// by name here, before any step; the global error's all-reduce is off unless asked for.
void check_resident(Options& o) {
  EXDYNA_CHECK_ARG(!o.global_error_given || !o.ef.measure_global_error,
                   "option resident=True steps without the global error's all-reduce; leave "
                   "measure_global_error out or set it to False");
  o.ef.measure_global_error = false;
  EXDYNA_CHECK_ARG(
      o.config.convergence.step_clip == 0, "option resident=True runs without ",
      "step_clip (its norm is summed on the host); step_clip=", o.config.convergence.step_clip,
      " given (exdyna.ddp.State sets 1.0 below d = 0.005 unless step_clip=0 is passed)");
  EXDYNA_CHECK_ARG(o.config.exdyna.controller == sparsifiers::Controller::kExact &&
                       o.config.values == core::ValueFormat::kFp32,
                   "option resident=True runs the exact controller with float32 values; "
                   "controller='",
                   sparsifiers::to_string(o.config.exdyna.controller), "', values='",
                   core::to_string(o.config.values), "' given");
}

Options parse_options(double density, const py::dict& kwargs) {
  Options o;
  o.config.density = density;
  for (const auto& [key, value] : kwargs) {
    const auto name = py::str(key).cast<std::string>();
    if (set_session_option(o, name, value)) continue;
    const auto* spec = sparsifiers::find_option_by_key(name);
    if (spec == nullptr) {
      std::string known;
      for (const auto& n : option_names()) known += (known.empty() ? "" : ", ") + n;
      throw InvalidArgument(detail::concat("unknown option '", name, "'; expected one of ", known));
    }
    const std::string text = option_text(*spec, name, value);
    try {
      spec->set(o.config, text);
    } catch (const InvalidArgument& e) {
      // "2.0 is not valid; expected ..." reads "option gamma=2.0 is not valid; expected ...".
      const std::string what = e.what();
      const bool about_text = what.rfind(text + " is not valid", 0) == 0;
      throw InvalidArgument(
          about_text ? detail::concat("option ", name, "=", shown(value), what.substr(text.size()))
                     : detail::concat("option ", name, "=", shown(value), ": ", what));
    }
  }
  if (o.ef.resident) check_resident(o);
  return o;
}

// The option table as Python reads it: one dict per option.
py::list option_table_rows() {
  py::list rows;
  for (const auto& o : sparsifiers::option_table()) {
    py::dict r;
    r["key"] = std::string(o.key);
    r["flag"] = std::string(o.primary_flag());
    r["kind"] = std::string(sparsifiers::to_string(o.kind));
    r["values"] = std::string(o.values);
    r["applies_to"] = std::string(o.applies_to);
    r["help"] = std::string(o.help);
    r["default"] = sparsifiers::default_text(o);
    rows.append(r);
  }
  return rows;
}

c10::intrusive_ptr<c10d::ProcessGroup> to_process_group(py::handle obj) {
  c10d::ProcessGroup* raw = nullptr;
  try {
    raw = obj.cast<c10d::ProcessGroup*>();
  } catch (const py::cast_error&) {
    throw InvalidArgument(
        detail::concat("process_group ", shown(obj), " is not a torch.distributed ProcessGroup"));
  }
  EXDYNA_CHECK_ARG(raw != nullptr, "process_group is None; expected a ProcessGroup");
  return c10::intrusive_ptr<c10d::ProcessGroup>::reclaim_copy(raw);
}

// torch registers its ProcessGroup type when torch.distributed is imported; the cast in
// to_process_group finds it only through pybind11 internals shared with torch. Without that every
// Sparsifier would fail on its process_group argument, so the import fails instead, saying why.
void require_process_group_type() {
  auto dist = py::module_::import("torch.distributed");
  if (!dist.attr("is_available")().cast<bool>())
    throw py::import_error(
        "exdyna: this torch was built without torch.distributed "
        "(torch.distributed.is_available() is False)");
  if (py::detail::get_type_info(typeid(c10d::ProcessGroup)) != nullptr) return;
  throw py::import_error(
      "exdyna._exdyna does not share pybind11 internals with torch (ours: " PYBIND11_INTERNALS_ID
      "), so it cannot take a torch.distributed ProcessGroup: it was built against another torch "
      "or another pybind11. Rebuild it with the torch you run: pip install --no-build-isolation .");
}

py::str py_name(std::string_view name) {
  return py::str(name.data(), name.size());
}

// A step's statistics, shaped by sparsifiers' list of fields (step_stats_fields.hpp): scalars at
// the top, each group (bytes, times) a nested dict, the per-worker fields lists. `value` makes the
// entry of a scalar field: its value in stats, its description in _stats_fields.
template <typename Scalar, typename PerWorker>
py::dict stats_shaped(Scalar value, PerWorker per_worker) {
  py::dict d;
  for (const auto& f : sparsifiers::step_scalar_fields()) d[py_name(f.name)] = value(f);
  for (const auto& g : sparsifiers::step_field_groups()) {
    py::dict sub;
    for (const auto& f : g.fields) sub[py_name(f.name)] = value(f);
    d[py_name(g.name)] = sub;
  }
  for (const auto& f : sparsifiers::step_per_worker_fields()) d[py_name(f.name)] = per_worker(f);
  return d;
}

py::dict stats_dict(const sparsifiers::StepStats& s) {
  return stats_shaped([&](const sparsifiers::StatField& f) { return py::cast(f.read(s)); },
                      [&](const sparsifiers::PerWorkerField& f) { return py::cast(f.read(s)); });
}

py::dict stats_descriptions() {
  return stats_shaped([](const sparsifiers::StatField& f) { return py_name(f.description); },
                      [](const sparsifiers::PerWorkerField& f) { return py_name(f.description); });
}

constexpr std::uint32_t kStateMagic = 0x59505845;  // "EXPY"
// Version 2 adds the momentum correction's velocity (empty when off); version 1 is still read.
constexpr std::uint32_t kStateVersion = 2;

// One error-feedback sparsifier bound to one process group; built on the first step or load,
// when the gradient length n_g is known.
class PySparsifier {
 public:
  PySparsifier(std::string name, double density, py::handle process_group, const py::dict& kwargs)
      : name_(std::move(name)), opt_(parse_options(density, kwargs)) {
    comm_ = comm::make_process_group_communicator(to_process_group(process_group), opt_.timeout);
    // Everything but what depends on n_g, checked now: a large n_g stands in for it.
    const std::int64_t probe_n_g = std::int64_t{1} << 31;
    sparsifiers::check_sparsifier(
        registry_, name_, sparsifiers::bind(opt_.config, probe_n_g, comm_->size(), comm_->rank()));
  }

  // stream: on a CUDA gradient, the cudaStream_t (as an integer) its work is ordered on.
  // in_place: the update overwrites grad (contiguous), which is returned; else a new tensor.
  at::Tensor step(const at::Tensor& grad, std::uintptr_t stream, bool in_place) {
    if (grad.scalar_type() != at::kFloat)
      throw py::type_error(detail::concat("gradient dtype ", c10::toString(grad.scalar_type()),
                                          " is not supported; expected torch.float32 (convert "
                                          "with .float() and back)"));
    if (in_place)
      EXDYNA_CHECK_ARG(grad.is_contiguous(), "an in-place step needs a contiguous gradient");
    if (grad.device().is_cuda()) return step_cuda(grad, stream, in_place);
    if (!grad.device().is_cpu())
      throw py::type_error(detail::concat("gradient on device ", grad.device().str(),
                                          " is not supported; expected a CPU or CUDA tensor"));
    EXDYNA_CHECK_ARG(!dev_,
                     "this sparsifier steps on CUDA tensors (its first step was on one); "
                     "got a CPU tensor");
    ensure_built(grad.numel());
    stepped_on_host_ = true;
    at::Tensor out = in_place ? grad : grad.detach().contiguous().clone();
    {
      py::gil_scoped_release nogil;
      last_ = ef_->step(std::span<float>(out.data_ptr<float>(), static_cast<std::size_t>(n_g_)),
                        *comm_);
    }
    has_stats_ = true;
    return out;
  }

  // The GPU path: error feedback with the residual on the device (DeviceErrorFeedback). A
  // sparsifier built on the host before its first step (load_state, set_residual) moves there.
  at::Tensor step_cuda(const at::Tensor& grad, std::uintptr_t stream, bool in_place) {
    EXDYNA_CHECK_ARG(sparsifiers::device_path_built(), "gradient on ", grad.device().str(),
                     ": this exdyna build has no GPU path "
                     "(built without CUDA); rebuild where nvcc is found, or step CPU tensors");
    EXDYNA_CHECK_ARG(
        comm_->takes_device_buffers(), "gradient on ", grad.device().str(),
        ": the process group's backend cannot move CUDA tensors; expected nccl or gloo");
    EXDYNA_CHECK_ARG(!stepped_on_host_,
                     "this sparsifier steps on CPU tensors (its first step was on one); got a "
                     "tensor on ",
                     grad.device().str());
    if (!dev_) build_device(grad.numel());
    EXDYNA_CHECK_ARG(grad.numel() == n_g_, "gradient has ", grad.numel(),
                     " elements; this sparsifier was built for ", n_g_,
                     " (use one Sparsifier per gradient buffer)");
    at::Tensor out = in_place ? grad : grad.detach().contiguous().clone();
    {
      py::gil_scoped_release nogil;
      last_ = dev_->step(out.data_ptr<float>(), *comm_, reinterpret_cast<void*>(stream));
    }
    has_stats_ = true;
    return out;
  }

  py::object stats() const { return has_stats_ ? py::object(stats_dict(last_)) : py::none(); }

  // The iteration, the residual and the sparsifier's own state, behind a header naming the
  // sparsifier, so a state is loaded only into the sparsifier that saved it.
  py::bytes save_state() const {
    core::ByteWriter w;
    w.put(kStateMagic);
    w.put(kStateVersion);
    w.put_string(fingerprint());
    w.put<std::int64_t>(iteration());
    if (ef_ || dev_) {
      w.put_list(std::span<const float>(residual_copy()));
      const auto s = dev_ ? dev_->sparsifier().save_state() : ef_->sparsifier().save_state();
      w.put_list(std::span<const std::byte>(s));
      w.put_list(dev_ ? std::span<const float>() : ef_->velocity());
    }
    const auto& b = w.bytes();
    return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
  }

  void load_state(const py::bytes& data) {
    const std::string raw = data;
    core::ByteReader r(std::as_bytes(std::span<const char>(raw.data(), raw.size())),
                       "exdyna sparsifier state");
    const bool magic = r.get<std::uint32_t>() == kStateMagic;
    const auto version = magic ? r.get<std::uint32_t>() : 0;
    EXDYNA_CHECK_ARG(magic && (version == 1 || version == kStateVersion),
                     "state is not an exdyna sparsifier state (version 1 or ", kStateVersion, ")");
    const std::string fp = r.get_string();
    const auto iteration = r.get<std::int64_t>();
    // A loaded state (iteration, residual and the sparsifier's own) moves to the device at the
    // first CUDA step, as one set before any step does (build_device).
    stepped_on_host_ = false;
    if (r.done()) {  // saved before its first step
      EXDYNA_CHECK_ARG(iteration == 0 && fp == fingerprint_for(0),
                       "state was saved by sparsifier '", fp, "', this one is '",
                       fingerprint_for(0), "'");
      ef_.reset();
      dev_.reset();
      n_g_ = 0;
      return;
    }
    auto residual = r.get_list<float>();
    auto sparsifier_state = r.get_list<std::byte>();
    const auto velocity = version >= 2 ? r.get_list<float>() : std::vector<float>();
    r.expect_end();
    const auto n = static_cast<std::int64_t>(residual.size());
    EXDYNA_CHECK_ARG(fp == fingerprint_for(n), "state was saved by sparsifier '", fp,
                     "', this one is '", fingerprint_for(n), "'");
    ef_.reset();
    if (dev_) {
      EXDYNA_CHECK_ARG(n == n_g_, "state is for ", n, " gradients; this sparsifier has ", n_g_);
      EXDYNA_CHECK_ARG(velocity.empty(),
                       "state has a velocity; on CUDA tensors there is no "
                       "momentum correction");
      dev_->residual_from_host(residual);
      dev_->set_iteration(iteration);  // first: it builds the warm-up phase's sparsifier
      dev_->sparsifier().load_state(sparsifier_state);
      return;
    }
    ensure_built(n);
    const auto u = ef_->mutable_velocity();
    EXDYNA_CHECK_ARG(velocity.size() == u.size(), "state has a velocity of ", velocity.size(),
                     " values; this sparsifier's momentum correction holds ", u.size());
    std::copy(residual.begin(), residual.end(), ef_->mutable_residual().begin());
    std::copy(velocity.begin(), velocity.end(), u.begin());
    ef_->set_iteration(iteration);  // first: it builds the sparsifier of the warm-up phase
    ef_->sparsifier().load_state(sparsifier_state);
  }

  // The error-feedback residual (a copy; None before the first step), and setting it, which
  // builds the sparsifier for its length: for the DDP hook, whose buckets DDP re-lays out.
  // (A CPU tensor either way: the hook carries residuals between buckets on the host, rarely.)
  py::object residual() const {
    if (!ef_ && !dev_) return py::none();
    auto r = residual_copy();
    return py::cast(
        at::from_blob(r.data(), {static_cast<std::int64_t>(r.size())}, at::kFloat).clone());
  }
  void set_residual(const at::Tensor& r) {
    if (r.scalar_type() != at::kFloat) throw py::type_error("residual: expected a float32 tensor");
    const at::Tensor c = r.detach().to(at::kCPU).contiguous();
    const std::span<const float> values(c.data_ptr<float>(), static_cast<std::size_t>(c.numel()));
    if (dev_) {
      EXDYNA_CHECK_ARG(c.numel() == n_g_, "residual has ", c.numel(), " elements; expected ", n_g_);
      dev_->residual_from_host(values);
      return;
    }
    ensure_built(c.numel());
    std::copy(values.begin(), values.end(), ef_->mutable_residual().begin());
  }

  // The momentum correction's velocity (a copy; None before the first step or when it is off),
  // and setting it (builds the sparsifier for its length), as the residual.
  py::object velocity() const {
    if (!ef_ || ef_->velocity().empty()) return py::none();
    const auto v = ef_->velocity();
    return py::cast(at::from_blob(const_cast<float*>(v.data()),
                                  {static_cast<std::int64_t>(v.size())}, at::kFloat)
                        .clone());
  }
  void set_velocity(const at::Tensor& v) {
    if (v.scalar_type() != at::kFloat) throw py::type_error("velocity: expected a float32 tensor");
    const at::Tensor c = v.detach().to(at::kCPU).contiguous();
    ensure_built(c.numel());
    const auto u = ef_->mutable_velocity();
    EXDYNA_CHECK_ARG(!u.empty(),
                     "set_velocity: this sparsifier has no momentum correction "
                     "(momentum_correction=0)");
    std::copy(c.data_ptr<float>(), c.data_ptr<float>() + c.numel(), u.begin());
  }

  // The bytes of a step's all-gathers (counts and indices) for a gradient of n_g on `world` ranks:
  // ExDyna's estimate (sparsifiers::ExDyna::gather_bytes); for the others a count per rank and
  // k indices. For the DDP hook's estimate before a bucket's step.
  std::int64_t gather_bytes(std::int64_t n_g, int world) const {
    const auto bound = sparsifiers::bind(opt_.config, n_g, world, 0);
    if (name_ == "exdyna") return sparsifiers::ExDyna::gather_bytes(bound);
    return 8 * static_cast<std::int64_t>(world) + 4 * bound.k();
  }

  std::int64_t n_g() const { return n_g_; }
  std::int64_t iteration() const { return dev_ ? dev_->iteration() : ef_ ? ef_->iteration() : 0; }
  const std::string& name() const { return name_; }
  double density() const { return opt_.config.density; }
  int rank() const { return comm_->rank(); }
  int world_size() const { return comm_->size(); }
  std::string fingerprint() const { return fingerprint_for(n_g_); }
  std::string fingerprint_for(std::int64_t n_g) const {
    return detail::concat(name_, ";", opt_.config.fingerprint(), ";built_n_g=", n_g);
  }

 private:
  std::vector<float> residual_copy() const {
    if (dev_) {
      std::vector<float> r(static_cast<std::size_t>(n_g_));
      dev_->residual_to_host(r);
      return r;
    }
    const auto r = ef_->residual();
    return {r.begin(), r.end()};
  }

  // The device error feedback, taking over the host one's residual, state and iteration where a
  // load_state or set_residual built that one first.
  void build_device(std::int64_t n_g) {
    EXDYNA_CHECK_ARG(n_g > 0, "gradient is empty; expected at least one element");
    EXDYNA_CHECK_ARG(!ef_ || n_g == n_g_, "gradient has ", n_g,
                     " elements; this sparsifier was built for ", n_g_);
    const auto bound = sparsifiers::bind(opt_.config, n_g, comm_->size(), comm_->rank());
    auto sp = registry_.make(name_, bound);
    EXDYNA_CHECK_ARG(sp->runs_on_device(), "sparsifier '", name_,
                     "' with these options has no "
                     "GPU path; on CUDA tensors these run: exdyna (controller paper or exact, "
                     "values fp32), dense (values fp32)");
    auto dev = sparsifiers::make_device_error_feedback(
        std::move(sp), n_g, sparsifiers::with_convergence(opt_.ef, name_, bound, registry_));
    if (ef_) {
      dev->residual_from_host(ef_->residual());
      dev->set_iteration(ef_->iteration());  // first: it builds the warm-up phase's sparsifier
      dev->sparsifier().load_state(ef_->sparsifier().save_state());
    }
    dev_ = std::move(dev);
    ef_.reset();
    n_g_ = n_g;
  }

  void ensure_built(std::int64_t n_g) {
    if (ef_) {
      EXDYNA_CHECK_ARG(n_g == n_g_, "gradient has ", n_g,
                       " elements; this sparsifier was built "
                       "for ",
                       n_g_, " (use one Sparsifier per gradient buffer)");
      return;
    }
    EXDYNA_CHECK_ARG(n_g > 0, "gradient is empty; expected at least one element");
    ef_ = std::make_unique<sparsifiers::ErrorFeedback>(sparsifiers::make_error_feedback(
        name_, opt_.config, n_g, comm_->size(), comm_->rank(), registry_, opt_.ef));
    n_g_ = n_g;
  }

  std::string name_;
  Options opt_;
  sparsifiers::Registry registry_ = sparsifiers::builtin_registry();
  std::unique_ptr<comm::Communicator> comm_;
  std::unique_ptr<sparsifiers::ErrorFeedback> ef_;
  std::unique_ptr<sparsifiers::DeviceErrorFeedback> dev_;  // the GPU path, after a CUDA step
  std::int64_t n_g_ = 0;
  sparsifiers::StepStats last_;
  bool has_stats_ = false;
  bool stepped_on_host_ = false;  // a CPU step ran since the last load: CUDA tensors are refused
};

// A benchmark kernel's argument: a contiguous CUDA tensor of this dtype.
void check_cuda_vector(const at::Tensor& t, at::ScalarType type, const char* name) {
  if (!t.device().is_cuda() || t.scalar_type() != type || !t.is_contiguous())
    throw py::type_error(detail::concat(name, ": expected a contiguous CUDA tensor of ",
                                        c10::toString(type), "; got ",
                                        c10::toString(t.scalar_type()), " on ", t.device().str()));
}

void translate(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const InvalidArgument& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const DataError& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const TimeoutError& e) {
    PyErr_SetString(PyExc_TimeoutError, e.what());
  } catch (const Error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
}

}  // namespace

}  // namespace exdyna::python

PYBIND11_MODULE(_exdyna, m) {
  using exdyna::python::PySparsifier;
  m.doc() = "exdyna's C++ sparsifiers with error feedback over a torch.distributed process group";
  exdyna::python::require_process_group_type();
  py::register_exception_translator(&exdyna::python::translate);
  m.def("sparsifier_names", [] { return exdyna::sparsifiers::builtin_registry().names(); });
  // CMake's project(VERSION), the one source: pyproject.toml reads it there too.
  m.def("version", [] { return std::string(EXDYNA_VERSION); });
  m.def("_stats_fields", &exdyna::python::stats_descriptions,
        "Sparsifier.stats' keys, each with its description (unit): the same nesting as stats");
  m.def("option_table", &exdyna::python::option_table_rows,
        "the option table: one dict per sparsifier option (key, flag, kind, values, applies_to, "
        "help, default)");
  m.def("option_names", &exdyna::python::option_names);
  // Refuses a bad name, density or option (ValueError naming it) without a process group: what
  // Sparsifier's constructor checks, less what depends on the group's size.
  m.def(
      "check_options",
      [](const std::string& name, double density, const py::dict& options) {
        const auto opt = exdyna::python::parse_options(density, options);
        exdyna::sparsifiers::check_sparsifier(
            exdyna::sparsifiers::builtin_registry(), name,
            exdyna::sparsifiers::bind(opt.config, std::int64_t{1} << 31, 1, 0));
      },
      py::arg("name"), py::arg("density"), py::arg("options"));
  m.def(
      "cuda_built", &exdyna::sparsifiers::device_path_built,
      "Whether this build has the GPU path (CUDA kernels; NCCL or Gloo groups over CUDA tensors)");
  // Single kernels of the GPU path, for bench/gpu: they run on `stream` (0: the default stream).
  m.def(
      "cuda_select_threshold",
      [](const at::Tensor& acc, double threshold, at::Tensor& out, std::uintptr_t stream) {
        exdyna::python::check_cuda_vector(acc, at::kFloat, "acc");
        exdyna::python::check_cuda_vector(out, at::kInt, "out");
        EXDYNA_CHECK_ARG(out.numel() >= acc.numel(), "out has room for ", out.numel(),
                         " indices; expected at least acc.numel() = ", acc.numel());
        py::gil_scoped_release nogil;
        return exdyna::sparsifiers::device_select_threshold(
            acc.data_ptr<float>(), acc.numel(), static_cast<float>(threshold),
            reinterpret_cast<std::uint32_t*>(out.data_ptr<std::int32_t>()),
            reinterpret_cast<void*>(stream));
      },
      py::arg("acc"), py::arg("threshold"), py::arg("out"), py::arg("stream") = 0);
  m.def(
      "cuda_accumulate",
      [](at::Tensor& residual, const at::Tensor& grad, std::uintptr_t stream) {
        exdyna::python::check_cuda_vector(residual, at::kFloat, "residual");
        exdyna::python::check_cuda_vector(grad, at::kFloat, "grad");
        EXDYNA_CHECK_ARG(residual.numel() == grad.numel(), "residual has ", residual.numel(),
                         " elements, grad ", grad.numel());
        std::int64_t bad;
        {
          py::gil_scoped_release nogil;
          bad = exdyna::sparsifiers::device_accumulate(residual.data_ptr<float>(),
                                                       grad.data_ptr<float>(), grad.numel(),
                                                       reinterpret_cast<void*>(stream));
        }
        EXDYNA_CHECK_T(exdyna::DataError, bad < 0, "grad or residual element ", bad,
                       " is not finite after the accumulate");
      },
      py::arg("residual"), py::arg("grad"), py::arg("stream") = 0);
  py::class_<PySparsifier>(m, "Sparsifier")
      .def(py::init<std::string, double, py::handle, const py::dict&>(), py::arg("name"),
           py::arg("density"), py::arg("process_group"), py::arg("options"))
      .def("step", &PySparsifier::step, py::arg("grad"), py::arg("stream") = 0,
           py::arg("in_place") = false)
      .def_property_readonly("stats", &PySparsifier::stats)
      .def("save_state", &PySparsifier::save_state)
      .def("load_state", &PySparsifier::load_state, py::arg("state"))
      .def("residual", &PySparsifier::residual)
      .def("set_residual", &PySparsifier::set_residual, py::arg("residual"))
      .def("velocity", &PySparsifier::velocity)
      .def("set_velocity", &PySparsifier::set_velocity, py::arg("velocity"))
      .def("gather_bytes", &PySparsifier::gather_bytes, py::arg("n_g"), py::arg("world"))
      .def_property_readonly("n_g", &PySparsifier::n_g)
      .def_property_readonly("iteration", &PySparsifier::iteration)
      .def_property_readonly("name", &PySparsifier::name)
      .def_property_readonly("density", &PySparsifier::density)
      .def_property_readonly("rank", &PySparsifier::rank)
      .def_property_readonly("world_size", &PySparsifier::world_size)
      .def_property_readonly("fingerprint", &PySparsifier::fingerprint);
}
