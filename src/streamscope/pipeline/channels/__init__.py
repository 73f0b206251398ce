"""The channels between stages, by where their ends are: a native FIFO in one process
(``fifo``), shared-memory slots between processes (``shm``), ``multiprocessing`` queues
watched from every process (``mpqueue``), and a link across a device or network boundary
(``link``).

In: items put and got by stages. Out: the items, in order, each end tapped."""
