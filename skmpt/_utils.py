"""What every layer of skmpt shares: random generators, devices and dtypes, the one memory
budget that sizes every chunk of work, the record of ``set_output``'s choice, and torch parameters
seen as the flat float64 vector SciPy's optimisers take.

Nothing here imports another skmpt module; every other module may import from here.
"""

import contextlib
import contextvars
import importlib
import numbers
import warnings

import numpy as np
import torch
from sklearn import get_config

__all__ = [
    "DTYPES",
    "OutputChoiceMixin",
    "check_generator",
    "chunk_budget",
    "flat_objective",
    "lbfgs_descent",
    "get_working_memory",
    "moved_names",
    "resolve_device",
    "resolve_dtype",
    "seeded",
    "working_memory",
]

#: Names of the torch dtypes skmpt accepts for a ``dtype`` parameter. The array estimators
#: take the first two; the masked-LM scorer takes all four (and "auto", the checkpoint's own).
DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

#: Default of :func:`working_memory`, in MiB: 2**24 float64 numbers.
DEFAULT_WORKING_MEMORY = 128

_working_memory = contextvars.ContextVar("skmpt_working_memory", default=DEFAULT_WORKING_MEMORY)


def get_working_memory():
    """The memory, in MiB, that one chunk of masks, copies or samples may take (default 128).

    Examples
    --------
    >>> import skmpt
    >>> skmpt.get_working_memory()
    128
    """
    return _working_memory.get()


@contextlib.contextmanager
def working_memory(mib):
    """Context manager that sets the memory one chunk of work may take, in MiB.

    As scikit-learn's ``working_memory`` setting: every chunked computation of skmpt (masks
    scored at once, masked copies per forward pass, importance samples, quadrature grids) sizes
    its chunks from it, so a smaller value trades speed for peak memory. Results do not depend
    on it beyond floating-point rounding.

    Parameters
    ----------
    mib : int or float
        Positive.

    Examples
    --------
    >>> import skmpt
    >>> with skmpt.working_memory(16):
    ...     skmpt.get_working_memory()
    16
    """
    if isinstance(mib, bool) or not isinstance(mib, numbers.Real) or not 0 < mib < float("inf"):
        raise ValueError(f"working_memory must be a positive, finite number of MiB; got {mib!r}.")
    token = _working_memory.set(mib)
    try:
        yield
    finally:
        _working_memory.reset(token)


def chunk_budget(fraction=1.0, itemsize=8):
    """How many numbers of ``itemsize`` bytes a chunk may hold: ``fraction`` of the working memory.

    Examples
    --------
    >>> from skmpt._utils import chunk_budget
    >>> chunk_budget() == 2**24
    True
    """
    return max(1, int(get_working_memory() * 2**20 * fraction) // itemsize)


def inverse_from_cholesky(factor):
    """The inverses ``L^-T L^-1`` of the matrices whose lower Cholesky factors ``L`` are ``factor``.

    What ``torch.cholesky_inverse`` returns, from one batched triangular solve and one product: on a
    batch of small factors ``torch.cholesky_inverse`` took up to twice the CPU (569 factors of 16 x 16,
    one thread: 1.2 against 0.6 ms; 455 of 30 x 30: 2.6 against 1.9 ms), half of factor analysis'
    EM step with holes. Differentiable.

    Examples
    --------
    >>> import torch
    >>> from skmpt._utils import inverse_from_cholesky
    >>> A = torch.tensor([[4.0, 2.0], [2.0, 3.0]], dtype=torch.float64)
    >>> torch.allclose(inverse_from_cholesky(torch.linalg.cholesky(A)) @ A, torch.eye(2, dtype=torch.float64))
    True
    """
    eye = torch.eye(factor.shape[-1], dtype=factor.dtype, device=factor.device)
    inverse = torch.linalg.solve_triangular(factor, eye.expand_as(factor), upper=False)
    return inverse.mT @ inverse


def flat_objective(parameters, evaluate):
    """Torch ``parameters`` as the one float64 vector of :func:`scipy.optimize.minimize` (``jac=True``).

    Parameters
    ----------
    parameters : list of torch.nn.Parameter
        Set in place from each vector SciPy evaluates (on their own device and dtype).
    evaluate : callable
        Called with the parameters set and their gradients cleared; computes a loss, calls its
        ``backward()`` and returns the objective's value as a float (the loss's own value, or another
        number whose gradient the loss carries).

    Returns
    -------
    fun : callable
        ``x -> (value, gradient)``, both float64 (numpy).
    x0 : ndarray
        The parameters' current values, flattened.
    load : callable
        ``x -> None``: sets the parameters to ``x`` (e.g. the optimum SciPy returns).

    Examples
    --------
    >>> import torch
    >>> from skmpt._utils import flat_objective
    >>> weight = torch.nn.Parameter(torch.tensor([3.0], dtype=torch.float64))
    >>> def evaluate():
    ...     loss = (weight - 1).square().sum()
    ...     loss.backward()
    ...     return float(loss.detach())
    >>> fun, x0, load = flat_objective([weight], evaluate)
    >>> fun(x0)
    (4.0, array([4.]))
    """

    def load(x):
        with torch.no_grad():
            torch.nn.utils.vector_to_parameters(torch.from_numpy(x).to(parameters[0]), parameters)

    def fun(x):
        load(x)
        for parameter in parameters:
            parameter.grad = None
        value = evaluate()
        gradient = torch.nn.utils.parameters_to_vector([p.grad for p in parameters])
        return value, gradient.detach().cpu().numpy().astype(np.float64)

    x0 = torch.nn.utils.parameters_to_vector(parameters).detach().cpu().numpy().astype(np.float64)
    return fun, x0, load


class _Stalled(Exception):
    """Raised by :func:`lbfgs_descent`'s callback to end SciPy's L-BFGS-B at its stopping rule."""


def lbfgs_descent(parameters, evaluate, tol, evaluations, history=10, bounds=None):
    """L-BFGS on a loss of torch ``parameters``, set in place to where it ends; the evaluations made.

    SciPy's L-BFGS-B runs on :func:`flat_objective`'s vector until an iteration after its first
    lowers the loss by less than ``tol / 10`` (at ``tol=0``, until SciPy finds no lower point), or
    after ``evaluations`` of the loss and its gradient (none where fewer than two). The first
    iteration is not judged: it is a gradient step of unit length, whose gain says nothing of the next
    ones' (judged too, it ended round after round of a Gaussian mixture's refit on ``star98`` with
    40 % of entries self-masked after that one step). The parameters end at the last point an
    iteration accepted. SciPy rather than a ``torch.optim``
    optimizer: one imports ``torch._dynamo`` on its first call, about 1 s of CPU that a process's
    first fit would pay.

    Parameters
    ----------
    parameters : list of torch.nn.Parameter
    evaluate : callable
        As :func:`flat_objective` takes it: computes the loss, calls its ``backward()`` and returns the
        loss's value as a float.
    tol : float
    evaluations : int
    history : int, default=10
        Pairs of steps and gradient changes kept (L-BFGS-B's ``maxcor``).
    bounds : list of (float or None, float or None) or None, default=None
        Lower and upper bounds of each entry of the flattened vector, as SciPy takes them; None: none.

    Returns
    -------
    evaluations : int

    Examples
    --------
    >>> import torch
    >>> from skmpt._utils import lbfgs_descent
    >>> weight = torch.nn.Parameter(torch.tensor([3.0, -2.0], dtype=torch.float64))
    >>> def evaluate():
    ...     loss = (weight - 1).square().sum()
    ...     loss.backward()
    ...     return float(loss.detach())
    >>> count = lbfgs_descent([weight], evaluate, tol=1e-12, evaluations=20)
    >>> weight.detach().numpy().round(6), count < 20
    (array([1., 1.]), True)
    """
    from scipy.optimize import minimize

    count, last = [0], [None]
    objective, start, load = flat_objective(parameters, evaluate)

    def value_and_gradient(x):
        count[0] += 1
        value = objective(x)
        last[0] = (x.copy(), value[0])
        return value

    if evaluations >= 2:
        at_start = value_and_gradient(start)
        losses, iterate = [at_start[0]], [start]

        def callback(x):  # after each iteration, at the point SciPy's line search accepted: its last evaluation
            losses.append(last[0][1] if np.array_equal(last[0][0], x) else value_and_gradient(x)[0])
            iterate[0] = np.array(x, copy=True)
            if len(losses) > 2 and losses[-2] - losses[-1] < tol / 10:
                raise _Stalled

        try:
            start = minimize(lambda x: at_start if np.array_equal(x, start) else value_and_gradient(x), start,
                             jac=True, method="L-BFGS-B", bounds=bounds, callback=callback, options={
                                 "maxiter": evaluations, "maxfun": evaluations - 1, "maxcor": history,
                                 "gtol": 0.0, "ftol": 0.0}).x
        except _Stalled:  # SciPy's own ftol would judge the first iteration too
            start = iterate[0]
    load(start)
    return count[0]


def check_generator(random_state=None):
    """Turn ``random_state`` into a CPU :class:`torch.Generator`.

    Parameters
    ----------
    random_state : None, int, numpy.random.RandomState, numpy.random.Generator \
            or torch.Generator, default=None
        ``None`` draws a fresh seed from NumPy's global state (so ``np.random.seed``
        makes it reproducible, as everywhere in scikit-learn); an int seeds the generator;
        a NumPy random state or generator supplies the seed; a torch generator is returned
        as it is. An int must lie in ``[0, 2**64)``.

    Returns
    -------
    generator : torch.Generator

    Examples
    --------
    >>> import torch
    >>> from skmpt.masks import check_generator
    >>> g = check_generator(0)
    >>> bool(torch.equal(torch.rand(3, generator=g), torch.rand(3, generator=check_generator(0))))
    True
    """
    if isinstance(random_state, torch.Generator):
        return random_state
    if random_state is None:
        seed = int(np.random.randint(np.iinfo(np.int32).max))
    elif isinstance(random_state, np.random.RandomState):
        seed = int(random_state.randint(np.iinfo(np.int32).max))
    elif isinstance(random_state, np.random.Generator):
        seed = int(random_state.integers(np.iinfo(np.int64).max))
    elif isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        seed = int(random_state)
        if not 0 <= seed < 2**64:
            raise ValueError(f"An int random_state must lie in [0, 2**64) (a torch seed); got {seed}.")
    else:
        raise ValueError(
            f"random_state must be None, an int, a numpy RandomState or Generator, or a "
            f"torch.Generator; got {random_state!r}."
        )
    return torch.Generator(device="cpu").manual_seed(seed)


def resolve_device(device):
    """``"auto"`` is CUDA when available, else the CPU; a CUDA device must exist.

    Examples
    --------
    >>> from skmpt._utils import resolve_device
    >>> resolve_device("cpu")
    device(type='cpu')
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N'; got {device!r}.") from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was asked for, but CUDA is not available; use 'auto' or 'cpu'.")
    if resolved.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N'; got {device!r}.")
    return resolved


def resolve_dtype(dtype):
    """The torch dtype a ``dtype`` parameter names: a name of :data:`DTYPES` or a torch dtype.

    Examples
    --------
    >>> from skmpt._utils import resolve_dtype
    >>> resolve_dtype("float32")
    torch.float32
    """
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return DTYPES[dtype]
    except (KeyError, TypeError):
        raise ValueError(f"dtype must be one of {sorted(DTYPES)} or a torch.dtype; got {dtype!r}.") from None


@contextlib.contextmanager
def seeded(seed, device):
    """torch's global generators seeded with ``seed`` inside the block, and restored after.

    The CPU generator is seeded, and the CUDA generator of ``device`` when it is a CUDA device;
    no other. (``torch.manual_seed`` would also queue the seeding of every CUDA device, recording
    a stack trace each time: a millisecond per call, which the stopping rule pays every epoch.)

    Examples
    --------
    >>> import torch
    >>> from skmpt._utils import seeded
    >>> with seeded(0, torch.device("cpu")):
    ...     a = torch.rand(2)
    >>> with seeded(0, torch.device("cpu")):
    ...     b = torch.rand(2)
    >>> bool(torch.equal(a, b))
    True
    """
    devices = []
    if device.type == "cuda":
        devices = [device.index if device.index is not None else torch.cuda.current_device()]
    with torch.random.fork_rng(devices=devices):  # initialises CUDA, filling its default_generators
        torch.default_generator.manual_seed(seed)
        for index in devices:
            torch.cuda.default_generators[index].manual_seed(seed)
        yield


def moved_names(package, moved):
    """A module ``__getattr__`` for names that moved out of ``package``, each found with a ``FutureWarning``.

    Parameters
    ----------
    package : str
        The module the names were taken from (``"skmpt.testing"``).
    moved : dict of str to str
        Each old name and the module that holds it now.

    Returns
    -------
    __getattr__ : callable
        For the module's ``__getattr__``: a moved name warns with its new spelling and is returned
        from its new module; any other name is an ``AttributeError``.

    Examples
    --------
    >>> import warnings
    >>> from skmpt._utils import moved_names
    >>> getattr_ = moved_names("old", {"sqrt": "math"})
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     getattr_("sqrt")(4.0)
    2.0
    >>> print(caught[0].message)
    old.sqrt is deprecated since 0.2.0 and will be removed in 0.3.0: import it from math (math.sqrt).
    """

    def __getattr__(name):
        if name not in moved:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        warnings.warn(
            f"{package}.{name} is deprecated since 0.2.0 and will be removed in 0.3.0: import it from "
            f"{moved[name]} ({moved[name]}.{name}).",
            FutureWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(moved[name]), name)

    return __getattr__


class OutputChoiceMixin:
    """``set_output(transform=...)``'s choice, recorded by the estimator itself and carried by
    :func:`~sklearn.base.clone`, for a transformer that builds its DataFrame output itself.

    Listed before scikit-learn's :class:`~sklearn.base.TransformerMixin` among the bases; scikit-learn
    still wraps the output as it does for every transformer, unless the class is declared with
    ``auto_wrap_output_keys=None`` (then ``transform`` returns the container itself: scikit-learn's
    wrapper assigns ``get_feature_names_out`` to a DataFrame's columns, which loses their name and
    turns integer labels into objects).

    Examples
    --------
    >>> from sklearn.base import BaseEstimator, TransformerMixin, clone
    >>> from skmpt._utils import OutputChoiceMixin
    >>> class Identity(OutputChoiceMixin, TransformerMixin, BaseEstimator):
    ...     def fit(self, X, y=None):
    ...         return self
    ...     def transform(self, X):
    ...         return X
    ...     def get_feature_names_out(self, input_features=None):
    ...         return input_features
    >>> clone(Identity().set_output(transform="pandas"))._output_container()
    'pandas'
    >>> Identity()._output_container()
    'default'
    """

    def set_output(self, *, transform=None):
        """Set the output container of ``transform`` and ``fit_transform``.

        Parameters
        ----------
        transform : {"default", "pandas", "polars"}, default=None
            ``"pandas"``: a DataFrame; ``"default"``: the estimator's own output; None: unchanged.

        Returns
        -------
        self : estimator instance
        """
        if transform not in (None, "default", "pandas", "polars"):
            raise ValueError(
                f"set_output(transform=...) takes 'default', 'pandas', 'polars' or None, not {transform!r}.")
        if transform is not None:
            self._transform_output = transform
        wrapped = getattr(super(), "set_output", None)  # absent where scikit-learn does not wrap the output
        return self if wrapped is None else wrapped(transform=transform)

    def __sklearn_clone__(self):
        new = super().__sklearn_clone__()
        if hasattr(self, "_transform_output"):
            new._transform_output = self._transform_output
        return new

    def _output_container(self):
        """``set_output``'s choice, else scikit-learn's configuration (``transform_output``)."""
        return getattr(self, "_transform_output", None) or get_config()["transform_output"]
