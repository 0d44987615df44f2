// A TrainerConfig for a zoo model at a given batch size, for the workerd tests.
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "workerd/nn/zoo.h"
#include "workerd/trainer.h"

namespace psrun::worker::test {

inline TrainerConfig zoo_trainer_config(const std::string& name, int batch_size) {
    TrainerConfig config;
    auto model = nn::load_model(name);
    INFO((model ? std::string() : model.error().message));
    REQUIRE(model);
    config.model = std::make_shared<const nn::ModelDescription>(std::move(*model));
    config.network.batch_size = batch_size;
    return config;
}

}  // namespace psrun::worker::test
