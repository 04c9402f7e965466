r"""A deep VAE with Monte Carlo masked conditionals and an importance-sampled LML.

.. math::

    z \sim \mathcal N(0, I_K), \qquad x \mid z \sim \mathcal N(f(z), \mathrm{diag}(v))
    \ \text{or}\ \mathrm{Bernoulli}(\sigma(f(z))),

with an MLP decoder ``f`` and an MLP encoder ``q(z | x) = N(m(x), diag(s(x)^2))``. The
conditionals ``p(x_j | x_r)`` are intractable; two estimates, batched over samples, masks and
particles, and differentiable for MPT training:

- ``"importance"``: self-normalised importance sampling with the encoder as proposal,
  ``q(z | x~)`` where ``x~`` is ``x`` with the masked tokens replaced by a fill value, mixed
  half and half with the prior (defensive importance sampling); weights
  ``w_s ∝ p(x_r | z_s) p(z_s) / ((q(z_s | x~) + p(z_s)) / 2)``;
  ``p(x_j | x_r) ≈ sum_s w_s p(x_j | z_s)``. Consistent as the particles grow.
- ``"pseudo_gibbs"``: recursive encoding-decoding (Rezende et al., 2014, appendix F): fill the
  masked tokens, then ``n_gibbs`` rounds of encode, sample ``z``, decode, overwrite the masked
  tokens with the decoded mean; predict with the decoder averaged over the final particles. Not
  consistent in general (Mattei and Frellsen, 2018).

The particles' standard-normal noise comes from the ``generator`` argument of each method
(never from state stored on the module, so concurrent calls do not interfere) and is shared by
the samples of a call, so a sample's estimate does not depend on which other samples are
scored with it.
"""

import math

import torch

from .._utils import chunk_budget
from .contract import (MaskedModel, conditioning_set, importance_log_weights, poisson_log_prob, standard_normal,
                       standard_normal_log_prob)
from .imputation import pick_components
from .likelihoods import Likelihood, make_likelihood

__all__ = ["TableLikelihood", "VAEModule"]

ACTIVATIONS = {
    "relu": torch.nn.ReLU,
    "tanh": torch.nn.Tanh,
    "logistic": torch.nn.Sigmoid,
    "identity": torch.nn.Identity,
}
CONDITIONALS = ("importance", "pseudo_gibbs")
#: The effective sample size at which :meth:`VAEModule.impute` stops drawing a row's particles
#: (it adds about 1 % of the conditional variance to the squared error; 1000 particles reached
#: 40 to 100 in the 1st percentile of rows of ``benchmarks/imputation_mixed.py``'s tuning tables, 210 to 410
#: in the median; the value was compared with 200 and with 1000 particles on those tables only).
IMPUTE_ESS = 100
# Particles of a row's first round of imputation; each further round doubles its total.
_FIRST_ROUND = 100


def _mlp(sizes, activation, dtype):
    layers = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        layers.append(torch.nn.Linear(n_in, n_out, dtype=dtype))
        if i < len(sizes) - 2:
            layers.append(ACTIVATIONS[activation]())
    return torch.nn.Sequential(*layers)


class VAEModule(MaskedModel):
    """MLP encoder and decoder with Monte Carlo masked conditionals.

    A stochastic :class:`MaskedModel`: every random method takes ``generator``.

    Parameters
    ----------
    n_features, n_components : int
    hidden_layer_sizes : tuple of int
        Encoder layers; the decoder mirrors them. ``()`` makes both linear.
    activation : {"relu", "tanh", "logistic", "identity"}
    likelihood : {"gaussian", "bernoulli"} or TableLikelihood
        One likelihood for every column, or a :class:`~skmpt.models.vae.TableLikelihood` (one head per column type:
        the decoder then gives its ``width`` numbers per row).
    conditional : {"importance", "pseudo_gibbs"}
    n_particles : int
        Particles per sample and mask for the conditionals.
    n_gibbs : int
        Encode-decode rounds of ``"pseudo_gibbs"``.
    fill : torch.Tensor of shape (n_features,)
        Value given to the encoder for masked tokens.
    variance_floor : float
        Lower bound of the Gaussian likelihood's per-feature variance.
    input_scale : torch.Tensor of shape (n_features,) or None, default=None
        With it, the encoder sees ``(x - fill) / input_scale``: columns of different units on one
        footing (it moves with the data's units, so the model stays closed under them).

    Examples
    --------
    >>> import torch
    >>> from skmpt.models import VAEModule
    >>> module = VAEModule(6, 2, (8,), "tanh", "gaussian", n_particles=4)
    >>> X = torch.randn(3, 6, dtype=torch.float64)
    >>> masks = torch.tensor([[True, False, False, False, False, False]])
    >>> module.masked_log_prob(X, masks, generator=torch.Generator().manual_seed(0)).shape
    torch.Size([3, 1, 6])
    """

    stochastic = True

    #: Masks per call of ``masked_log_prob``, fixed so that the particles' noise, drawn per
    #: call, does not depend on how many samples are scored (see :mod:`skmpt.objectives`).
    mask_chunk = 32

    def __init__(self, n_features, n_components, hidden_layer_sizes, activation, likelihood, *,
                 conditional="importance", n_particles=16, n_gibbs=5, fill=None, variance_floor=1e-3,
                 input_scale=None, dtype=torch.float64):
        super().__init__()
        if conditional not in CONDITIONALS:
            raise ValueError(f"conditional must be one of {CONDITIONALS}; got {conditional!r}.")
        hidden = list(hidden_layer_sizes)
        self.n_components = n_components
        self.conditional = conditional
        self.n_particles = n_particles
        self.n_gibbs = n_gibbs
        # A likelihood object (a TableLikelihood) or a name; compared by kind, not by class identity,
        # so that a module imported twice (pytest's importlib mode) still recognises it.
        table = not isinstance(likelihood, str)
        width = likelihood.width if table else n_features
        self.encoder = _mlp([n_features, *hidden, 2 * n_components], activation, dtype)
        self.decoder = _mlp([n_components, *reversed(hidden), width], activation, dtype)
        self.register_buffer("fill", torch.zeros(n_features, dtype=dtype) if fill is None else fill.to(dtype))
        self.register_buffer("input_scale", None if input_scale is None else input_scale.to(dtype))
        if table:
            self.likelihood = likelihood.to(dtype)
        else:
            # Gaussian: per-feature variance floor + exp(log_variance), starting at floor + 1.
            self.likelihood = make_likelihood(
                likelihood, self.fill, variance=torch.full((n_features,), 1.0 + variance_floor, dtype=dtype),
                floor=variance_floor,
            )

    # ------------------------------------------------------------------ building blocks
    def encode(self, X, *, observed=None):
        """Mean and log-variance of ``q(z | x)``, each of shape ``(..., K)``; the encoder sees the
        fill value at entries not ``observed``."""
        inputs = X if observed is None else torch.where(observed, X, self.fill)
        if self.input_scale is not None:
            inputs = (inputs - self.fill) / self.input_scale
        stats = self.encoder(inputs)
        return stats[..., : self.n_components], stats[..., self.n_components :]

    def decode(self, Z):
        """Mean of ``x`` given ``z``: ``f(z)`` (Gaussian) or ``sigmoid(f(z))`` (Bernoulli)."""
        return self.likelihood.mean(self.decoder(Z))

    def log_likelihood(self, X, Z, *, observed=None):
        """``sum_d log p(x_d | z)`` for ``Z`` of shape ``(n, K)`` or ``(n, S, K)``: ``(n,)`` or ``(n, S)``.

        With ``observed`` (``(n, D)``), the sum over each sample's observed entries.
        """
        return self._log_likelihood_of(X, self.decoder(Z), observed)

    def _log_likelihood_of(self, X, out, observed):
        """:meth:`log_likelihood` from the decoder's outputs ``out`` ``(n, ..., width)``."""
        X = X.reshape(X.shape[0], *([1] * (out.ndim - 2)), X.shape[1])
        token = self.likelihood.log_prob(X, out)
        if observed is not None:
            token = token * observed.reshape(X.shape).to(X.dtype)
        return token.sum(-1)

    def unstandardize_(self, center, scale):
        """Map a Gaussian model fitted on ``(x - center) / scale`` back to the units of ``x``."""
        if self.input_scale is not None:  # a table: the likelihood and the encoder's inputs move
            self.likelihood.unstandardize_(scale, center)
            self.fill.mul_(scale).add_(center)
            self.input_scale.mul_(scale.reshape(-1).abs())
            return self
        self.likelihood.unstandardize_(scale)
        first, last = self.encoder[0], self.decoder[-1]
        first.bias.sub_(first.weight @ center / scale)
        first.weight.div_(scale)
        last.weight.mul_(scale)
        last.bias.mul_(scale).add_(center)
        self.fill.mul_(scale).add_(center)
        return self

    # ------------------------------------------------------------------ conditionals
    def _importance(self, X, given, noise):
        """``log p(x_j | x_r)`` for all tokens, ``(n, P, D)``; noise ``(.., P, S, K)``."""
        log_w, token = self._importance_weights(X, given, noise)
        return torch.logsumexp(log_w.unsqueeze(-1) + token, dim=-2)

    def _importance_weights(self, X, given, noise):
        """Self-normalised log-weights ``(n, P, S)`` and ``log p(x_j | z_s)`` ``(n, P, S, D)``.

        Defensive importance sampling (Hesterberg, 1995): the first half of the particles come
        from the encoder given the filled-in data, the rest from the prior, and every particle
        is weighted by the mixture ``(q + p) / 2``. An encoder fitted to complete data is
        over-confident when most tokens are masked; the prior half bounds the weights.
        """
        filled = torch.where(given, X.unsqueeze(1), self.fill)
        mean, log_var = self.encode(filled)
        mean, std = mean.unsqueeze(-2), (0.5 * log_var).exp().unsqueeze(-2)
        from_encoder = torch.arange(noise.shape[-2], device=X.device) < (noise.shape[-2] + 1) // 2
        z = torch.where(from_encoder.unsqueeze(-1), mean + std * noise, noise)
        token = self.likelihood.log_prob(X[:, None, None, :], self.decoder(z))  # (n, P, S, D)
        observed = given.to(X.dtype).unsqueeze(-2)
        log_prior = standard_normal_log_prob(z)
        log_q = standard_normal_log_prob((z - mean) / std) - torch.log(std).sum(-1)
        log_mixture = torch.logaddexp(log_q, log_prior) - math.log(2)
        log_w = torch.log_softmax((token * observed).sum(-1) + log_prior - log_mixture, dim=-1)
        return log_w, token

    def _pseudo_gibbs(self, X, given, noise):
        """Recursive encode-decode; noise ``(.., n_gibbs + 1, P, S, K)``, one draw per round."""
        n_samples, n_features = X.shape
        data = X[:, None, None, :]
        mask = ~given.unsqueeze(-2)  # what the rounds fill in: masked or not observed
        filled = torch.where(mask, self.fill, data).expand(n_samples, given.shape[-2], self.n_particles, n_features)
        for round_noise in noise.unbind(-4)[:-1]:
            mean, log_var = self.encode(filled)
            z = mean + (0.5 * log_var).exp() * round_noise
            filled = torch.where(mask, self.decode(z), data)
        mean, log_var = self.encode(filled)
        z = mean + (0.5 * log_var).exp() * noise.unbind(-4)[-1]
        token = self.likelihood.log_prob(data, self.decoder(z))
        return torch.logsumexp(token, dim=-2) - math.log(self.n_particles)

    def masked_log_prob(self, X, masks, *, generator=None, observed=None):
        """Monte Carlo ``log p(x_j | x_r)`` at masked positions, zero elsewhere: ``(n, P, D)``.

        Shared masks ``(P, D)`` share the particles' noise across the samples, which are then
        processed a few at a time; per-sample masks ``(n, P, D)`` (training) draw noise per sample.
        The noise comes from ``generator`` (a CPU generator; ``None``: torch's global one).
        Entries not ``observed`` are left out of ``r``: the encoder sees the fill value there
        and the weights use the observed unmasked tokens only (masks shared by the samples
        become per-sample masks when the patterns differ).
        """
        method = self._importance if self.conditional == "importance" else self._pseudo_gibbs
        masks, log_prob = self._per_chunk(method, X, masks, generator, observed)
        return torch.where(masks, log_prob, torch.zeros_like(log_prob))

    def _per_chunk(self, method, X, masks, generator, observed):
        """``method(X, given, noise)`` over chunks of samples, with :meth:`masked_log_prob`'s noise:
        the masks (after :func:`~skmpt.models.contract.conditioning_set`) and the outputs, concatenated over samples."""
        masks, given = conditioning_set(masks, observed)
        n_samples, n_features = X.shape
        n_masks = masks.shape[-2]
        rounds = (self.n_gibbs + 1,) if self.conditional == "pseudo_gibbs" else ()
        lead = (n_samples,) if masks.ndim == 3 else ()
        noise = standard_normal((*lead, *rounds, n_masks, self.n_particles, self.n_components), X, generator)
        if masks.ndim == 3:
            return masks, method(X, given, noise)
        # (samples, masks, particles, features) tensors of a quarter of the working memory
        # (2**22 numbers by default).
        step = max(1, chunk_budget(1 / 4) // (n_masks * self.n_particles * n_features))
        parts = [method(X[i : i + step], given, noise) for i in range(0, n_samples, step)]
        if isinstance(parts[0], tuple):
            return masks, tuple(torch.cat(part) for part in zip(*parts, strict=True))
        return masks, torch.cat(parts)

    def masked_log_prob_weights(self, X, masks, *, generator=None, observed=None):
        """The importance weights behind :meth:`masked_log_prob`, for its diagnostics.

        The same draws as :meth:`masked_log_prob` with the same ``generator`` state;
        ``conditional="importance"`` only. ``masked_log_prob`` at a masked token is
        ``logsumexp(log_weights + token_log_prob, -2)``.

        Returns
        -------
        log_weights : torch.Tensor of shape (n, P, S)
            Self-normalised log-weights of the ``S = n_particles`` particles per sample and mask.
        token_log_prob : torch.Tensor of shape (n, P, S, D)
            ``log p(x_j | z_s)`` per particle.
        """
        if self.conditional != "importance":
            raise ValueError(f"importance weights exist for conditional='importance' only; got {self.conditional!r}.")
        return self._per_chunk(self._importance_weights, X, masks, generator, observed)[1]

    # ------------------------------------------------------------------ marginal likelihood
    def log_marginal(self, X, n_lml_samples=100, *, generator=None, observed=None):
        """Importance-sampled ``log p(x)`` with ``n_lml_samples`` draws from the encoder, per sample.

        Computed in chunks of draws and samples, so memory stays bounded. With ``observed``
        (``(n, D)``), ``log p(x_o)``: the encoder sees the fill value at the unobserved entries
        and the likelihood sums over the observed ones.
        """
        n, n_features = X.shape
        # Draws come in fixed chunks, shared by the samples: a sample's estimate does not
        # depend on which samples it is computed with.
        draws = min(n_lml_samples, 256)
        rows = max(1, chunk_budget(1 / 4) // (draws * n_features))
        total = X.new_full((n,), -math.inf)
        for start in range(0, n_lml_samples, draws):
            noise = standard_normal((min(draws, n_lml_samples - start), self.n_components), X, generator)
            chunk = torch.cat(
                [
                    importance_log_weights(self, X[i : i + rows], noise, observed=_rows(observed, i, rows))
                    for i in range(0, n, rows)
                ]
            )
            total = torch.logaddexp(total, torch.logsumexp(chunk, dim=1))
        total = total - math.log(n_lml_samples)
        # Nothing observed: log p(x_o) = log 1, exactly, not an estimate of it.
        return total if observed is None else torch.where(observed.any(-1), total, torch.zeros_like(total))

    def _importance_particles(self, X, observed, n_particles, generator):
        """MIWAE's particles for the rows ``X``, the decoder's outputs at them and their
        log-weights (not normalised), ``(n, S, K)``, ``(n, S, width)`` and ``(n, S)``.

        The proposal is the encoder given ``x_o`` (the fill value at missing entries), mixed
        half and half with the prior as in the masked conditionals (defensive importance
        sampling): ``w_s ∝ p(x_o | z_s) p(z_s) / ((q(z_s | x_o) + p(z_s)) / 2)``. An encoder
        trained on complete rows can be far off given a few observed entries; the prior half
        keeps the weights bounded.
        """
        mean, log_var = self.encode(X, observed=observed)
        mean, std = mean.unsqueeze(1), (0.5 * log_var).exp().unsqueeze(1)
        noise = standard_normal((X.shape[0], n_particles, self.n_components), X, generator)
        from_encoder = torch.arange(n_particles, device=X.device) < (n_particles + 1) // 2
        z = torch.where(from_encoder.unsqueeze(-1), mean + std * noise, noise)
        log_prior = standard_normal_log_prob(z)
        log_q = standard_normal_log_prob((z - mean) / std) - torch.log(std).sum(-1)
        log_proposal = torch.logaddexp(log_q, log_prior) - math.log(2)
        out = self.decoder(z)
        return z, out, self._log_likelihood_of(X, out, observed) + log_prior - log_proposal

    def _row_chunks(self, X, n_particles):
        # (rows, particles, features) tensors of a quarter of the working memory.
        step = max(1, chunk_budget(1 / 4) // (n_particles * X.shape[1]))
        return range(0, X.shape[0], step), step

    def impute(self, X, observed, *, n_particles=1000, target_ess=IMPUTE_ESS, generator=None):
        """``E[x | x_o]`` by self-normalised importance sampling (MIWAE; Mattei and Frellsen, 2019).

        ``sum_s w_s E[x | z_s]`` with draws from the encoder given the observed entries (with a
        :class:`~skmpt.models.vae.TableLikelihood`, a categorical entry's most probable category under
        ``sum_s w_s p(x_j | z_s)``) and weights ``w_s ∝ p(x_o | z_s) p(z_s) / q(z_s | x_o)``: consistent as the
        particles grow. A row draws particles in rounds (100, then doubling its total) until their effective
        sample size ``(sum_s w_s)^2 / sum_s w_s^2`` reaches ``target_ess`` or it holds ``n_particles``
        (``target_ess=None``: ``n_particles`` for every row); its Monte Carlo error then adds about
        ``1 / ESS`` of the conditional variance to the imputation's squared error. A row with no
        missing entry draws none. The ``observed`` entries stay ``X``'s.
        """
        out = X.clone()
        missing = torch.nonzero(~observed.all(-1)).flatten()
        _, step = self._row_chunks(X, n_particles)
        for i in range(0, len(missing), step):
            rows = missing[i : i + step]
            out[rows] = self._impute_rows(X[rows], observed[rows], n_particles, target_ess, generator)
        return torch.where(observed, X, out)

    def _rounds(self, X, observed, n_particles, target_ess, generator):
        """Rounds of particles for the rows ``X`` (100, then doubling each row's total) until a row's
        effective sample size ``(sum_s w_s)^2 / sum_s w_s^2`` reaches ``target_ess`` (``None``: one
        round of ``n_particles``) or it holds ``n_particles``: yields each round's rows (indices into
        ``X``) with :meth:`_importance_particles`' ``z``, decoder outputs and log-weights. All the
        particles come from one proposal, so a row's rounds together are one sample of its size."""
        total = X.new_full((X.shape[0],), -math.inf)  # log sum_s w_s
        squares = total.clone()  # log sum_s w_s^2
        active = torch.arange(X.shape[0], device=X.device)
        drawn = 0
        while len(active):
            size = n_particles - drawn if target_ess is None else min(max(drawn, _FIRST_ROUND), n_particles - drawn)
            z, out, log_w = self._importance_particles(X[active], observed[active], size, generator)
            yield active, z, out, log_w
            total[active] = torch.logaddexp(total[active], torch.logsumexp(log_w, -1))
            squares[active] = torch.logaddexp(squares[active], torch.logsumexp(2 * log_w, -1))
            drawn += size
            if drawn >= n_particles:
                break
            active = active[(2 * total[active] - squares[active]).exp() < target_ess]

    def _impute_rows(self, X, observed, n_particles, target_ess, generator):
        """:meth:`impute`'s rows ``X``: every round of :meth:`_rounds` pooled exactly into one
        self-normalised average per row."""
        table = self.likelihood.name == TableLikelihood.name
        total = X.new_full((X.shape[0],), -math.inf)  # log sum_s w_s
        average = None
        for active, _, out, log_w in self._rounds(X, observed, n_particles, target_ess, generator):
            values = self.likelihood.expectations(out) if table else self.likelihood.mean(out)
            part = torch.einsum("ns,nsd->nd", torch.softmax(log_w, -1), values)
            round_total = torch.logsumexp(log_w, -1)
            if average is None:
                average = X.new_zeros(X.shape[0], part.shape[-1])
            pooled = torch.logaddexp(total[active], round_total)
            average[active] = (average[active] * (total[active] - pooled).exp().unsqueeze(-1)
                               + part * (round_total - pooled).exp().unsqueeze(-1))
            total[active] = pooled
        return self.likelihood.predict_from(average) if table else average

    def sample_missing(self, X, observed, n_draws, *, n_particles=1000, target_ess=IMPUTE_ESS, generator=None):
        """Draws of ``x`` given ``x_o``, ``(n_draws, n, D)``, by sampling importance resampling:
        a particle ``z_s`` picked by its MIWAE weight among all of its row's, then ``x`` from the
        likelihood at it. A row draws its particles in the rounds of :meth:`impute` (until their
        effective sample size reaches ``target_ess`` or it holds ``n_particles``; ``target_ess=None``:
        ``n_particles``); a row with no missing entry draws none. The ``observed`` entries stay ``X``'s."""
        out = X.expand(n_draws, *X.shape).clone()
        missing = torch.nonzero(~observed.all(-1)).flatten()
        _, step = self._row_chunks(X, n_particles)
        for i in range(0, len(missing), step):
            rows = missing[i : i + step]
            out[:, rows] = self._sample_rows(X[rows], observed[rows], n_draws, n_particles, target_ess, generator)
        return torch.where(observed, X, out)

    def _sample_rows(self, X, observed, n_draws, n_particles, target_ess, generator):
        """:meth:`sample_missing`'s rows ``X``: each row's particles of every round, then the picks."""
        z = X.new_zeros(X.shape[0], n_particles, self.n_components)
        log_w = X.new_full((X.shape[0], n_particles), -math.inf)  # no particle drawn: weight 0
        start = 0
        for active, z_round, _, log_w_round in self._rounds(X, observed, n_particles, target_ess, generator):
            size = log_w_round.shape[-1]
            z[active, start : start + size], log_w[active, start : start + size] = z_round, log_w_round
            start += size
        z, log_w = z[:, :start], log_w[:, :start]
        picks = pick_components(torch.log_softmax(log_w, -1), n_draws, generator)  # (n_draws, rows)
        chosen = z[torch.arange(z.shape[0], device=X.device), picks]  # (n_draws, rows, K)
        return self.likelihood.sample(self.decoder(chosen), generator)

    def log_importance_weights(self, X, n_lml_samples=100, *, observed=None, generator=None):
        """The log-weights ``log p(x, z_s) - log q(z_s | x)`` behind :meth:`log_marginal`.

        The same draws as :meth:`log_marginal` with the same ``generator`` state, so
        ``logsumexp(w, 1) - log(n_lml_samples)`` is its estimate; held whole,
        ``(n, n_lml_samples)``, for the diagnostics of :func:`skmpt.models.importance_diagnostics`.
        """
        n, n_features = X.shape
        draws = min(n_lml_samples, 256)
        rows = max(1, chunk_budget(1 / 4) // (draws * n_features))
        chunks = []
        for start in range(0, n_lml_samples, draws):
            noise = standard_normal((min(draws, n_lml_samples - start), self.n_components), X, generator)
            chunks.append(
                torch.cat(
                    [
                        importance_log_weights(self, X[i : i + rows], noise, observed=_rows(observed, i, rows))
                        for i in range(0, n, rows)
                    ]
                )
            )
        return torch.cat(chunks, 1)

    def posterior(self, X, *, observed=None):
        """Encoder mean ``(n, K)`` and diagonal covariance ``(n, K, K)`` (the fill value at
        entries not ``observed``)."""
        mean, log_var = self.encode(X, observed=observed)
        return mean, torch.diag_embed(log_var.exp())


def _rows(observed, start, rows):
    """``observed`` of the rows ``start:start + rows`` (None when all are observed)."""
    return None if observed is None else observed[start : start + rows]


class TableLikelihood(Likelihood):
    r"""One likelihood head per column type, for tables of numbers, categories and counts.

    The decoder gives ``width`` numbers per row: one per numeric column, ``C_j`` logits per
    categorical column, one log-rate per count column, in that order. A numeric column is
    ``N(location_j + spread_j a_j, spread_j^2 (floor + exp(log_variance_j)))`` (the spread puts
    columns of different units on one footing); a categorical one is ``softmax`` of its logits
    over its categories (a binary column is a categorical of two: a Bernoulli), its entry read as
    the nearest of ``category_values``; a count ``(x - count_zero) / count_unit`` is
    ``Poisson(exp(a_j))``. All move with the data's units (``unstandardize_``), as in
    :class:`~skmpt.models.mixed.MixedMixtureModule`.

    Parameters
    ----------
    numeric_features, categorical_features, count_features : sequence of int
        The columns of each kind; together, each column once.
    category_values : list of torch.Tensor
        One per categorical column: its categories' values, distinct.
    location, spread : torch.Tensor of shape (n_numeric,)
        Each numeric column's centre and unit of the decoder's output; ``spread`` positive.
    variance_floor : float, default=1e-3
        Lower bound of a numeric column's variance, in units of ``spread ** 2``.

    Examples
    --------
    >>> import torch
    >>> from skmpt.models.vae import TableLikelihood
    >>> f64 = dict(dtype=torch.float64)
    >>> heads = TableLikelihood([0], [1], [2], [torch.tensor([0.0, 1.0, 2.0], **f64)],
    ...                         torch.zeros(1, **f64), torch.ones(1, **f64))
    >>> heads.width
    5
    >>> out = torch.tensor([[0.0, 0.0, 0.0, 0.0, 0.0]], **f64)
    >>> heads.log_prob(torch.tensor([[0.0, 2.0, 3.0]], **f64), out).exp().round(decimals=4).tolist()
    [[0.3987, 0.3333, 0.0613]]
    """

    name = "table"

    def __init__(self, numeric_features, categorical_features, count_features, category_values, location, spread,
                 *, variance_floor=1e-3):
        super().__init__()
        numeric, categorical, count = (torch.as_tensor(list(c), dtype=torch.long) for c in
                                       (numeric_features, categorical_features, count_features))
        order = torch.cat([numeric, categorical, count])
        if not torch.equal(order.sort().values, torch.arange(len(order))):
            raise ValueError("numeric_features, categorical_features and count_features must hold each column once.")
        if len(category_values) != len(categorical):
            raise ValueError("category_values needs one entry per categorical column.")
        self.register_buffer("numeric_features", numeric)
        self.register_buffer("categorical_features", categorical)
        self.register_buffer("count_features", count)
        self.register_buffer("column_order", order.argsort())
        self.sizes = [len(values) for values in category_values]
        width = max(self.sizes, default=0)
        values = location.new_zeros(len(self.sizes), width)
        valid = torch.zeros(len(self.sizes), width, dtype=torch.bool)
        for j, v in enumerate(category_values):
            values[j, : len(v)] = v
            valid[j, : len(v)] = True
        self.register_buffer("category_values", values)
        self.register_buffer("category_valid", valid)
        self.register_buffer("location", location.clone())
        self.register_buffer("spread", spread.clone())
        self.register_buffer("variance_floor", torch.as_tensor(float(variance_floor), dtype=location.dtype))
        self.log_variance = torch.nn.Parameter(location.new_zeros(len(numeric)))
        self.register_buffer("count_zero", location.new_zeros(len(count)))
        self.register_buffer("count_unit", location.new_ones(len(count)))

    @property
    def width(self):
        """Decoder outputs per row: ``n_numeric + sum_j C_j + n_count``."""
        return len(self.numeric_features) + sum(self.sizes) + len(self.count_features)

    def variance(self):
        """Each numeric column's variance, ``spread^2 (floor + exp(log_variance))``."""
        return self.spread.square() * (self.variance_floor + self.log_variance.exp())

    def _split(self, out):
        """``(numeric means, [logits of each categorical column], log-rates)`` of decoder outputs."""
        n_numeric = len(self.numeric_features)
        mean = self.location + self.spread * out[..., :n_numeric]
        logits = list(out[..., n_numeric : n_numeric + sum(self.sizes)].split(self.sizes, -1))
        return mean, logits, out[..., n_numeric + sum(self.sizes) :]

    def codes(self, X):
        """The category index of each categorical entry (the nearest value), ``(..., n_categorical)``."""
        if not self.category_values.numel():
            return X.new_zeros(*X.shape[:-1], len(self.sizes), dtype=torch.long)
        distance = (X[..., self.categorical_features].unsqueeze(-1) - self.category_values).abs()
        return distance.masked_fill(~self.category_valid, torch.inf).argmin(-1)

    def counts(self, X):
        """The counts ``(x - count_zero) / count_unit``, rounded, at least 0: ``(..., n_count)``."""
        return ((X[..., self.count_features] - self.count_zero) / self.count_unit).round().clamp_min(0)

    def log_prob(self, X, out):
        # X and out broadcast over their leading dimensions: each part is computed at X's shape
        # where it can be (codes, counts) and broadcast once.
        mean, logits, log_rate = self._split(out)
        variance = self.variance()
        residual = X[..., self.numeric_features] - mean
        parts = [-0.5 * (torch.log(2 * math.pi * variance) + residual.square() / variance)]
        shape = residual.shape[:-1]  # the broadcast leading dimensions
        codes = self.codes(X)
        parts += [torch.log_softmax(a, -1).expand(*shape, size).gather(-1, codes[..., j : j + 1].expand(*shape, 1))
                  for j, (a, size) in enumerate(zip(logits, self.sizes, strict=True))]
        k = self.counts(X)
        parts.append(poisson_log_prob(k, log_rate))
        return torch.cat(parts, -1)[..., self.column_order]

    def _values(self, codes):
        """The values of category indices ``codes`` ``(..., n_categorical)``."""
        values = self.category_values.expand(*codes.shape[:-1], *self.category_values.shape)
        return values.gather(-1, codes.unsqueeze(-1)).squeeze(-1)

    def _assemble(self, numeric, probabilities, rates):
        """Rows from numeric values, each categorical column's category probabilities (their most
        probable category) and the counts' means."""
        if probabilities:
            codes = torch.stack([p.argmax(-1) for p in probabilities], -1)
            categorical = self._values(codes)
        else:
            categorical = numeric.new_zeros(*numeric.shape[:-1], 0)
        counts = self.count_zero + self.count_unit * rates
        return torch.cat([numeric, categorical, counts], -1)[..., self.column_order]

    def mean(self, out):
        """Numeric and count columns: their mean; categorical ones: the most probable category."""
        mean, logits, log_rate = self._split(out)
        return self._assemble(mean, logits, log_rate.exp())

    def expectations(self, out):
        """What an imputation averages over particles, of decoder outputs ``out``: each numeric
        column's mean in the decoder's units, each categorical column's probabilities, each count's
        rate; ``(..., width)``, linear in the particles' weights (:meth:`predict_from` finishes)."""
        n_numeric, n_logits = len(self.numeric_features), sum(self.sizes)
        logits = out[..., n_numeric : n_numeric + n_logits].split(self.sizes, -1)
        return torch.cat([out[..., :n_numeric], *[torch.softmax(a, -1) for a in logits],
                          out[..., n_numeric + n_logits :].exp()], -1)

    def predict_from(self, average):
        """Rows imputed from :meth:`expectations` averaged over particles (weights summing to one),
        ``(n, width)``: numeric and count columns ``sum_s w_s E[x_j | z_s]``, categorical ones the
        most probable category under ``sum_s w_s p(x_j | z_s)``. Shape ``(n, n_features)``."""
        n_numeric, n_logits = len(self.numeric_features), sum(self.sizes)
        probabilities = list(average[..., n_numeric : n_numeric + n_logits].split(self.sizes, -1))
        return self._assemble(self.location + self.spread * average[..., :n_numeric], probabilities,
                              average[..., n_numeric + n_logits :])

    def sample(self, out, generator=None):
        mean, logits, log_rate = self._split(out)
        noise = torch.randn(mean.shape, generator=generator, dtype=out.dtype).to(out.device)
        numeric = mean + self.variance().sqrt() * noise
        codes = [torch.multinomial(torch.softmax(a, -1).detach().reshape(-1, a.shape[-1]).cpu(), 1,
                                   generator=generator).view(a.shape[:-1]).to(out.device) for a in logits]
        categorical = (self._values(torch.stack(codes, -1)) if codes else numeric.new_zeros(*numeric.shape[:-1], 0))
        counts = torch.poisson(log_rate.exp().detach().cpu(), generator=generator).to(out.device)
        rows = torch.cat([numeric, categorical, self.count_zero + self.count_unit * counts], -1)
        return rows[..., self.column_order]

    def unstandardize_(self, scale, center=None):
        """Map heads fitted on ``(x - center) / scale`` back to the units of ``x`` (``scale`` one number
        or one per column); the logits and rates stay. In place; returns self."""
        scale = scale.reshape(-1).expand(len(self.column_order))
        center = scale.new_zeros(len(scale)) if center is None else center
        numeric, categorical, count = self.numeric_features, self.categorical_features, self.count_features
        self.location.copy_(center[numeric] + scale[numeric] * self.location)
        self.spread.mul_(scale[numeric].abs())
        values = center[categorical].unsqueeze(-1) + scale[categorical].unsqueeze(-1) * self.category_values
        self.category_values.copy_(torch.where(self.category_valid, values, torch.zeros_like(values)))
        self.count_zero.copy_(center[count] + scale[count] * self.count_zero)
        self.count_unit.mul_(scale[count])
        return self
