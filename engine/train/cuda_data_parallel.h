// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Data parallelism over GPUs of this process, for code inside the CUDA plugin that makes its own CudaModel
// replicas (tandem-cli bench --devices; load_cuda_model makes the trainer's the same way). Defined in
// cuda_model_adapter.cpp, the only code that wraps a CudaModel as a TrainableModel.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "train/trainable_model.h"

namespace tandem {

class CudaModel;  // model/cuda_model.h

namespace train {

// One replica per entry of devices (rank r on devices[r]), each made by make(r) on a worker thread of its own with
// that GPU current (a CUDA model lives on the thread that made it), summed over the device transport: NCCL when it
// loads and the GPUs are distinct, else the peer communicator (TANDEM_DP_TRANSPORT=nccl|peer forces one).
// Error{InvalidInput} naming a GPU that does not exist.
std::unique_ptr<TrainableModel> cuda_data_parallel(const std::vector<int>& devices,
                                                   const std::function<std::unique_ptr<TrainableModel>(int)>& make);

// A CudaModel as the trainer's TrainableModel, and back: the CudaModel inside one (nullptr for other models).
std::unique_ptr<TrainableModel> trainable_cuda_model(CudaModel model);
CudaModel* cuda_model_of(TrainableModel& model);

}  // namespace train
}  // namespace tandem
