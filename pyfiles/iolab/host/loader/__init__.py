"""Deep-learning data loading on the benchmark hosts: what the loaders share (the loaders themselves are their kinds'
host programs: iolab.kinds.pytorch.host, iolab.kinds.tensorflow.host, and iolab.kinds.calibrate.host the timed step).

    python -m iolab.host.loader.dataset_state --root DS --files N --seed S --classes C --formats packed

Modules (this package imports nothing, so the light ones load without torch):

    common         the launcher (one rank process per accelerator), the step loop, loader.json (stdlib)
    readers        the samples of a data set as a torch Dataset: pil, cv2-imread, cv2-imdecode, packed
    dali_reader    reader dali: an NVIDIA DALI pipeline (file reader, image decoder, resize) per rank
    resnet         a compact ResNet-50 in torch.nn (also RetinaNet's backbone)
    retinanet      RetinaNet of torchvision's shape; unet3d: MLPerf's 3D U-Net (for calibration)
    models         the three at two scales (their sizes: model_shapes) and their one training step (AMP, compile, DDP)
    gds_reader     reader npz through GPUDirect Storage (kvikio, cuFile), what kvikio really did recorded
    proctree       CPU time of a process and all its descendants, from /proc
    syscalls       strace -c attached to a rank for its measured window; the summary table parsed
    dataset_state  is the data set (and its packs) already on this host? (the dataset_gen role's probe)
"""
