// The Python binding (module exdyna._exdyna): the C++ sparsifiers, with error feedback, stepping
// over a torch.distributed process group that the user already has. The pure-Python package
// (python/exdyna: Sparsifier, ddp.State, ddp.hook) wraps this module; nothing here re-implements
// an algorithm.
//
// The process group arrives as the Python object torch.distributed hands out. torch 1.13 binds
// c10d::ProcessGroup with pybind11 (torch._C._distributed_c10d) under the same pybind11 internals
// ABI as this module (pybind11 2.10, "__pybind11_internals_v4_gcc_libstdcpp_cxxabi1017__" on Debian
// 12), so pybind11 finds torch's type record and casts the object to c10d::ProcessGroup* directly;
// the communicator then holds its own reference (intrusive_ptr::reclaim_copy). CMake checks that
// the interpreter's torch and the libtorch we link are the same 1.13.
//
// Errors: exdyna::InvalidArgument and DataError -> ValueError, TimeoutError -> TimeoutError, other
// exdyna errors and c10 errors -> RuntimeError; a gradient that is not float32 -> TypeError. The
// collectives run with the GIL released.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "exdyna/comm/engines/process_group_communicator.hpp"
#include "exdyna/core/byte_io.hpp"
#include "exdyna/sparsifiers/factory.hpp"

namespace py = pybind11;

namespace exdyna::python {

namespace {

using sparsifiers::SparsifierConfig;

// Python-side options: what the CLI's sparsifier flags set (apps/sparsifier_cli.hpp), in Python's
// spelling (--min-blk -> min_blk). Defaults are `exdyna train`'s: the exact controller and balance
// and the automatic worker cap, which hold the density at d on real gradients.
struct Options {
  SparsifierConfig config;
  sparsifiers::ErrorFeedbackOptions ef;
  std::chrono::milliseconds timeout{300'000};
  bool cap_set = false;
};

std::string shown(py::handle v) {
  return py::str(py::repr(v));
}

double number(const std::string& name, py::handle v) {
  EXDYNA_CHECK_ARG(!py::isinstance<py::bool_>(v) &&
                       (py::isinstance<py::float_>(v) || py::isinstance<py::int_>(v)),
                   "option ", name, "=", shown(v), " is not valid; expected a number");
  return v.cast<double>();
}

std::int64_t integer(const std::string& name, py::handle v) {
  EXDYNA_CHECK_ARG(!py::isinstance<py::bool_>(v) && py::isinstance<py::int_>(v), "option ", name,
                   "=", shown(v), " is not valid; expected an integer");
  return v.cast<std::int64_t>();
}

// An integer option held in an int: 1 .. INT_MAX, refused naming it (a cast would wrap).
int positive_int(const std::string& name, py::handle v) {
  const auto i = integer(name, v);
  EXDYNA_CHECK_ARG(i >= 1 && i <= std::numeric_limits<int>::max(), "option ", name, "=", shown(v),
                   " is not valid; expected an integer in 1 .. ", std::numeric_limits<int>::max());
  return static_cast<int>(i);
}

std::string text(const std::string& name, py::handle v) {
  EXDYNA_CHECK_ARG(py::isinstance<py::str>(v), "option ", name, "=", shown(v),
                   " is not valid; expected a string");
  return v.cast<std::string>();
}

// parse(text), its refusal prefixed with the option's name.
template <typename F>
auto named(const std::string& name, F&& parse) {
  try {
    return parse();
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(detail::concat("option ", name, ": ", e.what()));
  }
}

using Setter = std::function<void(Options&, const std::string&, py::handle)>;

const std::map<std::string, Setter>& setters() {
  static const std::map<std::string, Setter> table = {
      {"gather",
       [](Options& o, const std::string& n, py::handle v) {
         o.config.gather_mode = named(n, [&] { return comm::parse_gather_mode(text(n, v)); });
       }},
      {"values",
       [](Options& o, const std::string& n, py::handle v) {
         o.config.values = named(n, [&] { return core::parse_value_format(text(n, v)); });
       }},
      {"blocks",
       [](Options& o, auto& n, py::handle v) { o.config.exdyna.n_blocks = integer(n, v); }},
      {"min_blk",
       [](Options& o, auto& n, py::handle v) { o.config.exdyna.min_blk = number(n, v); }},
      {"blk_move",
       [](Options& o, auto& n, py::handle v) { o.config.exdyna.blk_move = integer(n, v); }},
      {"alpha", [](Options& o, auto& n, py::handle v) { o.config.exdyna.alpha = number(n, v); }},
      {"beta", [](Options& o, auto& n, py::handle v) { o.config.exdyna.beta = number(n, v); }},
      {"gamma", [](Options& o, auto& n, py::handle v) { o.config.exdyna.gamma = number(n, v); }},
      {"initial_threshold",
       [](Options& o, auto& n, py::handle v) { o.config.exdyna.initial_threshold = number(n, v); }},
      {"controller",
       [](Options& o, const std::string& n, py::handle v) {
         o.config.exdyna.controller = named(n, [&] { return core::parse_controller(text(n, v)); });
       }},
      {"balance",
       [](Options& o, const std::string& n, py::handle v) {
         o.config.exdyna.balance = named(n, [&] { return core::parse_balance(text(n, v)); });
       }},
      {"worker_cap",
       [](Options& o, const std::string& n, py::handle v) {
         const std::string s =
             py::isinstance<py::str>(v) ? v.cast<std::string>() : std::to_string(number(n, v));
         o.config.exdyna.worker_cap = named(n, [&] { return core::parse_worker_cap(s); });
         o.cap_set = true;
       }},
      {"ladder_rungs",
       [](Options& o, auto& n, py::handle v) {
         o.config.exdyna.ladder_rungs = static_cast<int>(integer(n, v));
       }},
      {"ladder_span",
       [](Options& o, auto& n, py::handle v) { o.config.exdyna.ladder_span = number(n, v); }},
      {"hard_threshold",
       [](Options& o, auto& n, py::handle v) { o.config.hard_threshold = number(n, v); }},
      {"sidco_stages",
       [](Options& o, auto& n, py::handle v) {
         o.config.sidco.stages = static_cast<int>(integer(n, v));
       }},
      {"randomk_seed",
       [](Options& o, auto& n, py::handle v) {
         const auto s = integer(n, v);
         EXDYNA_CHECK_ARG(s >= 0, "option ", n, "=", shown(v),
                          " is not valid; expected an integer >= 0");
         o.config.randomk.seed = static_cast<std::uint64_t>(s);
       }},
      {"dgc_sample", [](Options& o, auto& n, py::handle v) { o.config.dgc.sample = number(n, v); }},
      {"oktopk_period",
       [](Options& o, auto& n, py::handle v) { o.config.oktopk.period = positive_int(n, v); }},
      {"oktopk_repartition",
       [](Options& o, auto& n, py::handle v) { o.config.oktopk.repartition = positive_int(n, v); }},
      {"measure_global_error",
       [](Options& o, const std::string& n, py::handle v) {
         EXDYNA_CHECK_ARG(py::isinstance<py::bool_>(v), "option ", n, "=", shown(v),
                          " is not valid; expected True or False");
         o.ef.measure_global_error = v.cast<bool>();
       }},
      {"timeout",
       [](Options& o, const std::string& n, py::handle v) {
         const double s = number(n, v);
         EXDYNA_CHECK_ARG(s > 0 && s < 1e7, "option ", n, "=", shown(v),
                          " is not valid; expected seconds > 0");
         o.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(s * 1000));
       }},
  };
  return table;
}

std::string option_names() {
  std::string s;
  for (const auto& [name, _] : setters()) s += (s.empty() ? "" : ", ") + name;
  return s;
}

Options parse_options(double density, const py::dict& kwargs) {
  Options o;
  o.config.density = density;
  o.config.exdyna.controller = core::Controller::kExact;
  o.config.exdyna.balance = core::Balance::kExact;
  for (const auto& [key, value] : kwargs) {
    const auto name = py::str(key).cast<std::string>();
    const auto it = setters().find(name);
    EXDYNA_CHECK_ARG(it != setters().end(), "unknown option '", name, "'; expected one of ",
                     option_names());
    it->second(o, name, value);
  }
  // As `exdyna train`: the Poisson-floor cap with the exact controller unless set.
  if (!o.cap_set)
    o.config.exdyna.worker_cap =
        o.config.exdyna.controller == core::Controller::kExact ? core::ExDynaOptions::kAutoCap : 0;
  return o;
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

py::dict bytes_dict(const comm::ByteCounts& b) {
  py::dict d;
  d["allgather_counts"] = b.allgather_counts;
  d["allgather_indices"] = b.allgather_indices;
  d["allreduce"] = b.allreduce;
  d["broadcast"] = b.broadcast;
  d["alltoall"] = b.alltoall;
  d["padded_elements"] = b.padded_elements;
  d["total"] = b.total();
  return d;
}

py::dict stats_dict(const sparsifiers::StepStats& s) {
  py::dict d;
  d["iteration"] = s.iteration;
  d["world_size"] = s.world_size;
  d["n_g"] = s.n_g;
  d["k"] = s.k_target;
  d["target_density"] = s.target_density;
  d["threshold"] = s.threshold;
  d["k_per_worker"] = s.k_per_worker;
  d["k_total"] = s.k_total;
  d["k_unique"] = s.k_unique;
  d["density"] = s.density;
  d["density_error"] = s.density_error;
  d["f_t"] = s.f_t;
  d["padded_elements"] = s.padded_elements;
  d["global_error"] = s.global_error;
  d["alloc_per_worker"] = s.alloc_per_worker;
  d["blocks_per_partition"] = s.blocks_per_partition;
  d["bytes"] = bytes_dict(s.bytes);
  py::dict t;
  t["accumulate"] = s.times.accumulate;
  t["select"] = s.times.select;
  t["select_cpu"] = s.times.select_cpu;  // the select phases' thread CPU time
  t["allgather"] = s.times.allgather;
  t["allreduce"] = s.times.allreduce;
  t["broadcast"] = s.times.broadcast;
  t["update"] = s.times.update;
  t["other"] = s.times.other;
  d["times"] = t;
  return d;
}

constexpr std::uint32_t kStateMagic = 0x59505845;  // "EXPY"
constexpr std::uint32_t kStateVersion = 1;

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

  at::Tensor step(const at::Tensor& grad) {
    if (grad.scalar_type() != at::kFloat)
      throw py::type_error(detail::concat("gradient dtype ", c10::toString(grad.scalar_type()),
                                          " is not supported; expected torch.float32 (convert "
                                          "with .float() and back)"));
    if (!grad.device().is_cpu())
      throw py::type_error(detail::concat("gradient on device ", grad.device().str(),
                                          " is not supported; expected a CPU tensor"));
    ensure_built(grad.numel());
    at::Tensor out = grad.detach().contiguous().clone();
    {
      py::gil_scoped_release nogil;
      last_ = ef_->step(std::span<float>(out.data_ptr<float>(), static_cast<std::size_t>(n_g_)),
                        *comm_);
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
    w.put<std::int64_t>(ef_ ? ef_->iteration() : 0);
    if (ef_) {
      w.put_list(ef_->residual());
      const auto s = ef_->sparsifier().save_state();
      w.put_list(std::span<const std::byte>(s));
    }
    const auto& b = w.bytes();
    return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
  }

  void load_state(const py::bytes& data) {
    const std::string raw = data;
    core::ByteReader r(std::as_bytes(std::span<const char>(raw.data(), raw.size())),
                       "exdyna sparsifier state");
    EXDYNA_CHECK_ARG(
        r.get<std::uint32_t>() == kStateMagic && r.get<std::uint32_t>() == kStateVersion,
        "state is not an exdyna sparsifier state (version ", kStateVersion, ")");
    const std::string fp = r.get_string();
    const auto iteration = r.get<std::int64_t>();
    if (r.done()) {  // saved before its first step
      EXDYNA_CHECK_ARG(iteration == 0 && fp == fingerprint_for(0),
                       "state was saved by sparsifier '", fp, "', this one is '",
                       fingerprint_for(0), "'");
      ef_.reset();
      n_g_ = 0;
      return;
    }
    auto residual = r.get_list<float>();
    auto sparsifier_state = r.get_list<std::byte>();
    r.expect_end();
    const auto n = static_cast<std::int64_t>(residual.size());
    EXDYNA_CHECK_ARG(fp == fingerprint_for(n), "state was saved by sparsifier '", fp,
                     "', this one is '", fingerprint_for(n), "'");
    ef_.reset();
    ensure_built(n);
    std::copy(residual.begin(), residual.end(), ef_->mutable_residual().begin());
    ef_->sparsifier().load_state(sparsifier_state);
    ef_->set_iteration(iteration);
  }

  // The error-feedback residual (a copy; None before the first step), and setting it, which
  // builds the sparsifier for its length: for the DDP hook, whose buckets DDP re-lays out.
  py::object residual() const {
    if (!ef_) return py::none();
    const auto r = ef_->residual();
    return py::cast(at::from_blob(const_cast<float*>(r.data()),
                                  {static_cast<std::int64_t>(r.size())}, at::kFloat)
                        .clone());
  }
  void set_residual(const at::Tensor& r) {
    if (r.scalar_type() != at::kFloat || !r.device().is_cpu())
      throw py::type_error("residual: expected a float32 CPU tensor");
    ensure_built(r.numel());
    const at::Tensor c = r.contiguous();
    std::copy_n(c.data_ptr<float>(), n_g_, ef_->mutable_residual().begin());
  }

  std::int64_t n_g() const { return n_g_; }
  std::int64_t iteration() const { return ef_ ? ef_->iteration() : 0; }
  const std::string& name() const { return name_; }
  double density() const { return opt_.config.density; }
  int rank() const { return comm_->rank(); }
  int world_size() const { return comm_->size(); }
  std::string fingerprint() const { return fingerprint_for(n_g_); }
  std::string fingerprint_for(std::int64_t n_g) const {
    return detail::concat(name_, ";", opt_.config.fingerprint(), ";built_n_g=", n_g);
  }

 private:
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
  std::int64_t n_g_ = 0;
  sparsifiers::StepStats last_;
  bool has_stats_ = false;
};

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
  // torch's ProcessGroup type must be registered before a group can be cast.
  py::module_::import("torch.distributed");
  py::register_exception_translator(&exdyna::python::translate);
  m.def("sparsifier_names", [] { return exdyna::sparsifiers::builtin_registry().names(); });
  m.def("option_names", [] {
    std::vector<std::string> v;
    for (const auto& [name, _] : exdyna::python::setters()) v.push_back(name);
    return v;
  });
  py::class_<PySparsifier>(m, "Sparsifier")
      .def(py::init<std::string, double, py::handle, const py::dict&>(), py::arg("name"),
           py::arg("density"), py::arg("process_group"), py::arg("options"))
      .def("step", &PySparsifier::step, py::arg("grad"))
      .def_property_readonly("stats", &PySparsifier::stats)
      .def("save_state", &PySparsifier::save_state)
      .def("load_state", &PySparsifier::load_state, py::arg("state"))
      .def("residual", &PySparsifier::residual)
      .def("set_residual", &PySparsifier::set_residual, py::arg("residual"))
      .def_property_readonly("n_g", &PySparsifier::n_g)
      .def_property_readonly("iteration", &PySparsifier::iteration)
      .def_property_readonly("name", &PySparsifier::name)
      .def_property_readonly("density", &PySparsifier::density)
      .def_property_readonly("rank", &PySparsifier::rank)
      .def_property_readonly("world_size", &PySparsifier::world_size)
      .def_property_readonly("fingerprint", &PySparsifier::fingerprint);
}
