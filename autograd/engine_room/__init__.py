"""The engine room: the optimised forms of ops whose plain form lives in `autograd.functional`
or `autograd.optim`. Each module names the plain form it replaces and is tested against it;
`autograd.plain()` switches them all off. What each one gains is measured in
docs/performance.md, not here."""
