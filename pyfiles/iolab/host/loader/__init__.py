"""Deep-learning data loading on the benchmark hosts: what a training input pipeline gets from storage.

    python -m iolab.host.loader.torch_loader --root DS --out RUN_DIR --reader packed --workers 4 ...
    python -m iolab.host.loader.tf_loader --root DS --out RUN_DIR --private-threads 8 ...
    python -m iolab.host.loader.dataset_state --root DS --files N --seed S --classes C --formats packed
    python -m iolab.host.loader.calibrate --out RUN_DIR --batch resnet50:400 [--scale tiny]

Modules (this package imports nothing, so the light ones load without torch):

    common         the launcher (one rank process per accelerator), the step loop, loader.json (stdlib)
    readers        the samples of a data set as a torch Dataset: pil, cv2-imread, cv2-imdecode, packed
    dali_reader    reader dali: an NVIDIA DALI pipeline (file reader, image decoder, resize) per rank
    torch_loader   DataLoader + emulated or real accelerators → loader.json
    tf_loader      tf.data on the TFRecord shards + emulated accelerators → loader.json
    resnet         a compact ResNet-50 in torch.nn (also RetinaNet's backbone)
    retinanet      RetinaNet of torchvision's shape; unet3d: MLPerf's 3D U-Net (for calibration)
    models         the three at two scales (their sizes: model_shapes) and their one training step (AMP, compile, DDP)
    calibrate      the training step timed with the batch on the device → calibration.json (bench.calibrate)
    gds_reader     reader npz through GPUDirect Storage (kvikio, cuFile), what kvikio really did recorded
    proctree       CPU time of a process and all its descendants, from /proc
    syscalls       strace -c attached to a rank for its measured window; the summary table parsed
    dataset_state  is the data set (and its packs) already on this host? (the dataset_gen role's probe)
"""
